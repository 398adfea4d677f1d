"""Real framework output read live: Lightning's bars, the HF Trainer, TensorBoard files.

Each test runs the real framework in a subprocess (a tiny model built from a
config, tiny random data made in the script, nothing downloaded) writing
stdout/stderr into files, exactly as the engine launches a run, and reads
those files through the engine's own `RunLive` while the process lives.
"""

import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from tui.campaign.loading.metrics import with_watch_defaults
from tui.campaign.plan import StopRule
from tui.campaign.presets import build_spec
from tui.engine.reading.feeds import RunFeeds
from tui.engine.watching.live import RunLive
from tui.engine.rules import RuleSet
from tui.engine.ledger.events import RunExited, RunLaunched

SCRIPTS = Path(__file__).parent / "scripts"
pytestmark = pytest.mark.slow


class Watched:
    """A run of SCRIPT with its streams in RUN_DIR, read live by RunLive (and a second
    reader keeping every record, to compare with what the framework computed)."""

    def __init__(self, run_dir: Path, spec, metric: str, args, env=None, timeout=600):
        self.run_dir = run_dir
        rules = RuleSet(with_watch_defaults((StopRule("non_finite"),), spec), "v", "run")
        self.live = RunLive("v", run_dir, rules, spec, metric, "min", time.time())
        reader = RunFeeds(run_dir, spec)
        self.records: list[dict] = []
        self.alive_records = 0  # records read while the process was still running
        self.stop = None
        self.stop_while_alive = False
        with open(run_dir / "stdout.log", "wb") as out, open(run_dir / "stderr.log", "wb") as err:
            proc = subprocess.Popen([sys.executable, *map(str, args)], stdout=out, stderr=err,
                                    env=dict(os.environ, **(env or {})), cwd=run_dir)
        # a guard against a hang, not a measure: a framework's import alone takes a
        # minute on a busy 2-core box, and the run trains after it
        deadline = time.monotonic() + timeout
        try:
            while True:
                alive = proc.poll() is None
                stop = self.live.poll(time.time())
                if stop is not None and self.stop is None:
                    self.stop, self.stop_while_alive = stop, alive
                for _, batch in reader.poll():
                    self.records += batch
                if alive:
                    self.alive_records = len(self.records)
                if not alive and not reader.pending():
                    break
                assert time.monotonic() < deadline, "the framework run did not end in time"
                time.sleep(0.05)
        finally:
            if proc.poll() is None:
                proc.kill()
        self.returncode = proc.wait()


# -- Lightning ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lightning_tqdm(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("lightning_tqdm")
    run = Watched(run_dir, build_spec("lightning"), "val_loss",
                  [SCRIPTS / "lightning_bar.py", "--bar", "tqdm", "--epochs", "3", "--nan-at",
                   "12", "--sleep", "0.08", "--truth", run_dir / "truth.json"])
    assert run.returncode == 0, (run_dir / "stderr.log").read_text()[-2000:]
    run.truth = json.loads((run_dir / "truth.json").read_text())
    return run


def test_lightning_tqdm_bar_is_read_live_with_its_last_values(lightning_tqdm):
    run = lightning_tqdm
    assert 0 < run.alive_records  # read while it trained, not after
    last = {}
    for r in run.records:
        if "step" in r and "epoch" in r:
            last[(int(r["epoch"]), r["step"])] = r
    checked = 0
    for epoch, n, global_step, loss in run.truth:
        shown = last[(epoch, n)]
        assert shown["global_step"] == global_step  # the bar restarts each epoch; this not
        if loss is not None:
            assert shown["train_loss"] == float(f"{loss:.3g}"), (epoch, n)  # tqdm's .3g
            assert shown["loss"] == shown["train_loss"]  # the chart's loss
            checked += 1
    assert checked == 12
    assert run.live.view().global_step == 24


def test_lightning_nan_is_stopped_by_non_finite_within_one_record(lightning_tqdm):
    run = lightning_tqdm
    first_nan_step = next(g for _, _, g, loss in run.truth if loss is None)
    assert run.stop is not None and run.stop_while_alive
    assert run.stop.rule == "non_finite" and run.stop.step == first_nan_step
    assert run.stop.reason.startswith("loss=nan")  # Lightning printed train_loss=nan.0
    first = next(i for i, r in enumerate(run.records) if math.isnan(r.get("loss", 0.0)))
    assert run.records[first]["global_step"] == first_nan_step  # the first NaN record


def test_lightning_rich_bar_with_tty_compatible_is_read(tmp_path):
    """Rich draws nothing live into a file unless told the file is a terminal
    (rich >= 14 reads TTY_COMPATIBLE=1); then its frames are \\r-separated, coloured
    segments the lightning preset reads like the TQDM bar (README, `[metrics]`)."""
    run = Watched(tmp_path, build_spec("lightning"), "val_loss",
                  [SCRIPTS / "lightning_bar.py", "--bar", "rich", "--epochs", "2",
                   "--batches", "6", "--truth", tmp_path / "truth.json"],
                  env={"TTY_COMPATIBLE": "1"})
    assert run.returncode == 0, (tmp_path / "stderr.log").read_text()[-2000:]
    truth = {(e, n): loss for e, n, _, loss in json.loads((tmp_path / "truth.json").read_text())}
    shown = [r for r in run.records if "train_loss" in r and "step" in r]
    assert shown and b"\x1b[" in (tmp_path / "stdout.log").read_bytes()
    for epoch in (0, 1):
        end = [r for r in shown if r["epoch"] == epoch and r["step"] == 6][-1]
        assert end["train_loss"] == float(f"{truth[(epoch, 6)]:.3f}")  # Rich prints .3f
    assert any("val_loss" in r for r in run.records)
    assert run.stop is None and run.live.view().global_step == 12


# -- Hugging Face Trainer -------------------------------------------------------------
@pytest.fixture(scope="module")
def hf_nan(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("hf_nan")
    run = Watched(run_dir, build_spec("hf_trainer"), "eval_loss",
                  [SCRIPTS / "hf_nan_print.py", "--sleep", "0.05"],
                  env={"ITERA_MAX_STEPS": "30", "ITERA_RUN_DIR": str(run_dir)})
    assert run.returncode == 0, (run_dir / "stderr.log").read_text()[-2000:]
    return run


def test_hf_trainer_nan_weights_are_caught_through_grad_norm(hf_nan):
    run = hf_nan
    losses = [r["loss"] for r in run.records if "loss" in r]
    assert losses and all(math.isfinite(v) for v in losses)  # the NaN filter hid it...
    assert any(math.isnan(r.get("grad_norm", 0.0)) for r in run.records)  # ...not this
    assert run.stop is not None and run.stop_while_alive
    assert run.stop.rule == "non_finite" and run.stop.reason.startswith("grad_norm=nan")
    # the true step of each printed dict: its epoch x 16 steps per epoch (64 examples, 4 a
    # batch), before any trainer_state.json exists (it never saves): the bar's redraw
    # after each dict dates it, not the bar a poll earlier (issue 41: "step 2" for 4)
    dicts = [r for r in run.records if r["source"] == "stdout" and "epoch" in r]
    assert len(dicts) >= 6
    assert [r.get("global_step") for r in dicts] == [round(r["epoch"] * 16) for r in dicts]
    first_nan = next(r for r in dicts if math.isnan(r.get("grad_norm", 0.0)))
    assert first_nan["global_step"] == 20  # NaN weights after step 15, logged every 5
    assert run.stop.step == 20, run.stop
    assert run.stop.reason.endswith("at step 20")
    assert run.live.view().global_step == 30  # the bar's count, bounded by ITERA_MAX_STEPS


def test_a_run_that_exits_0_after_training_into_nan_is_not_accepted(hf_nan, tmp_path):
    from tui.campaign import load_plan
    from tui.engine.ledger.file import Ledger, read_ledger
    from tui.engine.conclusion.outcome import read_run, rejection_cause
    from tui.engine.ledger.state import replay

    (tmp_path / "campaign.toml").write_text(
        '[campaign]\nname = "t"\nquestion = "q"\nmetric = "eval_loss"\ndirection = "min"\n'
        '[[lot]]\ngpu = "cpu"\nhours = 1\nprice_usd = 1.0\n'
        '[[variant]]\nid = "control"\ncategory = "mandatory"\ncommand = ["python", "x.py"]\n'
        'minutes = 5\n[metrics]\npreset = "hf_trainer"\n[deliverables]\nfiles = ["model.txt"]\n')
    plan = load_plan(tmp_path / "campaign.toml")
    ledger = Ledger(tmp_path / "ledger.jsonl", clock=lambda: 5.0)
    ledger.append(RunLaunched(run="control-abc-1", target="control", kind="run",
                  category="mandatory", attempt=1, config_hash="abc", pid=1, pid_start=1.0))
    ledger.append(RunExited(run="control-abc-1", exit_code=0))
    run = replay(read_ledger(tmp_path / "ledger.jsonl")).run("control-abc-1")
    assert run.state == "completed" and (hf_nan.run_dir / "model.txt").is_file()
    cause = rejection_cause(plan, run, hf_nan.run_dir)
    assert cause is not None and "grad_norm was nan" in cause
    assert read_run(plan, hf_nan.run_dir).final_metric is not None  # eval_loss was finite once


# -- TensorBoard ----------------------------------------------------------------------
def test_tensorboard_scalars_are_tailed_incrementally_and_nan_is_stopped(tmp_path):
    go = tmp_path / "go"
    spec = build_spec(None, tensorboard="tb/**/events.out.tfevents.*")
    rules = RuleSet(with_watch_defaults((StopRule("non_finite"),), spec), "v", "run")
    live = RunLive("v", tmp_path, rules, spec, "val_acc", "max", time.time())
    proc = subprocess.Popen([sys.executable, SCRIPTS / "tb_writer.py", tmp_path / "tb" / "run",
                             "--steps", "30", "--nan-at", "20", "--sleep", "0.01",
                             "--wait-for", go], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 60
        while live.view().records == 0:  # the writer waits after its first step
            assert time.time() < deadline and proc.poll() is None, proc.stderr.read()
            assert live.poll(time.time()) is None
            time.sleep(0.05)
        first = live.view()
        go.touch()
        stop = None
        polls_after_exit = 0
        while polls_after_exit < 3:  # what it wrote just before it left is read too
            fired = live.poll(time.time())
            stop = stop or fired
            polls_after_exit += proc.poll() is not None
            assert time.time() < deadline
            time.sleep(0.05)
    finally:
        proc.kill() if proc.poll() is None else None
    assert first.records == 1 and first.global_step == 1 and first.last_loss == 1.0
    assert stop.rule == "non_finite" and stop.step == 20 and stop.reason.startswith("loss=nan")
    view = live.view()
    assert view.global_step == 30 and view.best_metric == pytest.approx(0.75)
    assert view.problems == () and view.bad_lines == 0


def test_the_tensorboard_reader_is_imported_only_when_asked_and_pulls_no_torch(tmp_path):
    subprocess.run([sys.executable, SCRIPTS / "tb_writer.py", tmp_path / "tb", "--steps", "3"],
                   check=True, capture_output=True)
    code = (
        "import sys, json\n"
        "import tui.engine, tui.engine.watching.live\n"
        "before = 'tensorboard' in sys.modules\n"
        "from tui.engine.reading.tensorboard import TensorBoardFeed\n"
        f"feed = TensorBoardFeed({str(tmp_path)!r}, 'tb/events.out.tfevents.*')\n"
        "records = feed.poll()\n"
        "print(json.dumps([before, 'tensorboard' in sys.modules, 'torch' in sys.modules,"
        " len(records)]))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [False, True, False, 3]


def test_without_the_tensorboard_package_the_feed_says_so_and_never_raises(tmp_path):
    code = (
        "import sys, json\n"
        "sys.modules['tensorboard'] = None  # as if it were not installed\n"
        "from tui.engine.watching.live import RunLive\n"
        "from tui.engine.rules import RuleSet\n"
        "from tui.campaign.presets import build_spec\n"
        "spec = build_spec(None, tensorboard='**/events.*')\n"
        f"live = RunLive('v', __import__('pathlib').Path({str(tmp_path)!r}), RuleSet((), 'v',"
        " 'run'), spec, 'acc', 'max', 0.0)\n"
        "live.poll(1.0); live.poll(2.0)\n"
        "print(json.dumps(live.view().problems))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONPATH=str(REPO)), check=True)
    (problem,) = json.loads(out.stdout.strip().splitlines()[-1])
    assert "pip install 'itera-tui[tensorboard]'" in problem
