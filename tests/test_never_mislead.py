"""What the decision point, the verdict, the budget and `check` say must be true.

The tests run the engine, the CLI and training scripts that print the way nanoGPT,
pytorch/examples or a crashing script do (as real processes, or on the engine's fake
processes where the subject is what is said: tests/fakeprocs.py) and assert what a
person would read: a pilot is what happened up to its bound, a run counts only
when it is accepted (with its reason when it is not, the same in `status`, the
ending and the report), `check` refuses what will surely fail, the verdict is
`pending` while runs go on, and headless exit codes do not call a failure done.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from clikit import cli
from conftest import needs, run_cli
from enginekit import copy_scripts, script_cmd
from fakeprocs import FakeClock, FakeProcesses, fake_host
from fakeprocs import tick_until as fake_tick_until
from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.ledger.file import read_ledger
from tui.engine.ledger.state import replay


def campaign(root: Path, body: str, *, metric: str = "acc", direction: str = "max",
             minutes: float = 20, metrics: str | None = None) -> Path:
    metrics = metrics if metrics is not None else textwrap.dedent("""
        [metrics]
        step = 'step (\\d+)'
        loss = 'loss[:=]? *(\\S+)'
        acc = 'acc=(\\S+)'
    """)
    text = textwrap.dedent(f"""
        [campaign]
        name = "t"
        question = "q"
        metric = "{metric}"
        direction = "{direction}"

        [[lot]]
        gpu = "cpu"
        minutes = {minutes}
        price_usd = 1.0
        gpus = 1

        [engine]
        grace_seconds = 2.0
    """) + metrics + textwrap.dedent(body)
    copy_scripts(root)
    path = root / "campaign.toml"
    path.write_text(text)
    return path


def state_of(path: Path):
    return replay(read_ledger(path.parent / ".itera" / "ledger.jsonl"))


def tick_until(engine: Engine, predicate, what: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, f"timed out waiting for {what}"
        engine.tick()
        time.sleep(0.05)


# -- a pilot is what happened up to its bound ----------------------------------------

NANOGPT = """
[[variant]]
id = "control"
category = "mandatory"
command = {control}
minutes = 1

[[variant]]
id = "wide"
category = "useful"
command = {wide}
minutes = 1

[pilot]
steps = 100
decide = "ask"

[[stop]]
rule = "non_finite"
"""


@pytest.mark.slow
def test_a_nanogpt_pilot_that_goes_nan_is_stopped_by_the_rule_and_ends_at_its_bound(tmp_path):
    args = ("--max-iters", "3000", "--eval-interval", "60")
    path = campaign(tmp_path, NANOGPT.format(
        control=script_cmd("nanogpt_style.py", *args),
        wide=script_cmd("nanogpt_style.py", *args, "--nan-from", "90")),
        metric="val_loss", direction="min", metrics='[metrics]\npreset = "nanogpt"\n')
    engine = Engine(load_plan(path), poll_interval=0.05).open()
    try:
        tick_until(engine, lambda: engine.state.decision_pending is not None,
                   "the decision point")
        state, views = engine.state, engine.snapshot().live
    finally:
        engine.close()
    wide = state.runs_of("wide", "pilot")[-1]
    # nanoGPT ignores the bound: it printed `loss nan` from iter 90, and the rule that
    # fired there is the pilot's, not a healthy "completed" pilot
    assert wide.state == "stopped" and wide.stop.rule == "non_finite"
    assert wide.stop.step is not None and wide.stop.step >= 90
    control = state.runs_of("control", "pilot")[-1]
    # the control ignores the bound too: SIGTERM at the bound ends it there (issue 34, 6)
    assert control.state == "completed" and control.stop.rule == "pilot_bound"
    # the figures are those up to the bound: val loss at step 60, not the 1.276 of step 120
    val_at_60 = round(4.0 / (1 + 60 / 50) + 0.1, 4)
    figures = state.decision_pending.pilot
    for vid in ("control", "wide"):
        assert figures[vid]["metric"] == pytest.approx(val_at_60), vid
        assert views[figures[vid]["run"]].last_step <= 100
    assert views[figures["control"]["run"]].past_bound > 0  # printed past it, not counted
    assert figures["wide"]["problem"].startswith("stopped by non_finite: ")
    assert figures["control"]["problem"] is None
    # the decision point suggests dropping it, with the rule
    from tui.app.pilot_figures import pilot_rows, problem_lines, suggestion_lines

    room = SimpleNamespace(state=state, engine=SimpleNamespace(live=views))
    rows = pilot_rows(engine.plan, state.decision_pending, room)
    assert any(line.startswith("suggested drop: wide (pilot stopped by non_finite")
               for line in suggestion_lines(rows))
    assert "wide: stopped by non_finite: " in "\n".join(
        problem_lines(engine.plan, rows, state.decision_pending))


# -- the control's pilot crashing -------------------------------------------------------

PRINTS_NO_ACC = "print('step 1 loss: 0.5')"  # b's `python -c`: exits 0, no acc

CRASHING_CONTROL = """
[[variant]]
id = "control"
category = "mandatory"
command = {control}
minutes = 1

[[variant]]
id = "b"
category = "useful"
command = {b}
minutes = 1

[pilot]
steps = 5
decide = "ask"
"""


def test_the_control_pilot_crashing_shows_its_crash_and_headless_continue_stops(
        tmp_path, monkeypatch):
    def b_prints_no_acc(run):  # what `python -c` prints, then its exit 0
        if run.argv[-1] == PRINTS_NO_ACC:
            run.print("step 1 loss: 0.5")
            run.exit(0)
    fake_host(monkeypatch, b_prints_no_acc)  # headless in the test's process, on fakes
    path = campaign(tmp_path, CRASHING_CONTROL.format(
        control=script_cmd("printer.py", "--bogus-flag"),  # argparse: usage, exit 2
        b=json.dumps(["python", "-c", PRINTS_NO_ACC])))
    proc = cli("run", "--headless", "--decide", "continue", str(path), cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "not continuing: the control's pilot failed (exit 2): " in proc.stderr
    assert "unrecognized arguments: --bogus-flag" in proc.stderr
    assert "--force-continue" in proc.stderr
    state = state_of(path)
    assert not [r for r in state.runs if r.kind == "run"]  # no full run was spent on it
    assert state.decided is None
    # the decision point (ledger figures, the room's modal lines) shows the crash line
    control = state.decision_pending.pilot["control"]
    assert control["state"] == "failed"
    assert any("unrecognized arguments: --bogus-flag" in line for line in control["crash"])
    from tui.app.pilot_figures import pilot_rows, problem_lines

    plan = load_plan(path)
    room = SimpleNamespace(state=state, engine=SimpleNamespace(live={}))
    rows = pilot_rows(plan, state.decision_pending, room)
    lines = problem_lines(plan, rows, state.decision_pending)
    assert any(line.startswith("control: failed (exit 2): ")
               and "--bogus-flag" in line for line in lines), lines
    assert "b: no acc value by its bound" in lines  # exited 0, but nothing to compare
    assert lines[-1].startswith("⚠ continue: the control's pilot failed (exit 2)")
    assert "the full runs will likely fail the same way" in lines[-1]


def test_headless_exits_4_when_nothing_was_accepted_because_the_runs_failed(tmp_path,
                                                                          monkeypatch):
    helpers = fake_host(monkeypatch).wrapup  # headless in this process: fake runs, wrap-up
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {script_cmd("printer.py", "--bogus-flag")}
        minutes = 1
    """)
    proc = cli("run", "--headless", str(path), cwd=tmp_path)
    assert proc.returncode == 4, proc.stdout + proc.stderr  # not 0: no honest "no" either
    assert "draw" in helpers.kinds()  # the bundle was built by the wrap-up it was handed
    assert "bundle: outputs/bundle (verified)" in proc.stdout  # the bundle itself is fine
    assert "verdict: inconclusive: no accepted control" in proc.stdout
    assert "not accepted: control-" in proc.stdout and "--bogus-flag" in proc.stdout


# -- status during a run ------------------------------------------------------------------

def test_status_during_a_run_says_pending(tmp_path):
    """On the engine's fake processes and clocks (tests/fakeprocs.py): what `status` reads
    is the ledger, which says the same of a fake run as of a real one."""
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {script_cmd("printer.py", "--steps", "4000", "--sleep", "0.05")}
        minutes = 1
    """)
    clock = FakeClock()
    procs = FakeProcesses(clock)
    engine = Engine(load_plan(path), clock=clock.wall, monotonic=clock.mono,
                    poll_interval=0.05, processes=procs).open()
    try:
        fake_tick_until(engine, procs, clock, lambda: engine.state.running and (
            engine.snapshot().live.get(engine.state.running[0].id) or
            SimpleNamespace(records=0)).records > 0, "the run's first records")
        data = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
        assert data["verdict"] == {"verdict": "pending", "reason": "1 run still going"}
        text = cli("status", str(path), cwd=tmp_path).stdout
        assert "verdict: pending: 1 run still going" in text
        assert "inconclusive" not in text
        rid = engine.state.running[0].id
        engine.stop_run(rid, "the test is over")
        fake_tick_until(engine, procs, clock, lambda: not engine.state.running,
                        "the run to stop")
    finally:
        engine.close()


# -- what counts ----------------------------------------------------------------------------

WHAT_COUNTS = """
[[variant]]
id = "control"
category = "mandatory"
command = {control}
minutes = 1

[[variant]]
id = "broken"
category = "useful"
command = {broken}
minutes = 1

[[variant]]
id = "quiet"
category = "useful"
command = ["python", "-c", "print('step 1 loss: 0.5')"]
minutes = 1

[[variant]]
id = "nan"
category = "useful"
command = {nan}
minutes = 1

[deliverables]
files = ["model.pt"]
"""


@pytest.mark.slow
@needs("torch")
def test_unverified_no_metric_and_nan_runs_are_not_accepted_and_not_divided_by(tmp_path):
    path = campaign(tmp_path, WHAT_COUNTS.format(
        control=script_cmd("deliver.py", "--label", "control", "--torch"),
        broken=script_cmd("printer.py", "--steps", "5", "--write", "model.pt"),
        nan=script_cmd("printer.py", "--steps", "5", "--nan-at", "3", "--write", "model.pt")))
    proc = run_cli("run", "--headless", str(path), cwd=tmp_path, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # the bundle is NOT verified
    data = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
    budget = data["budget"]
    causes = {r["run_id"].split("-")[0]: r["cause"] for r in budget["rejections"]}
    assert budget["accepted"] == 1 and budget["per_deliverable_usd"] == 1.0  # 1 USD / 1
    assert causes["broken"].startswith("deliverable not verified: model.pt does not reload")
    assert causes["quiet"] == "no acc value was reported"
    assert causes["nan"].startswith("non-finite numbers: loss was nan at step 3")
    assert "control" not in causes
    text = cli("status", str(path), cwd=tmp_path).stdout
    report = (tmp_path / "outputs" / "bundle" / "report.md").read_text()
    for vid, cause in causes.items():  # the same words in status, the ending and the report
        assert cause in text and cause in report and cause in proc.stdout, vid
    manifest = json.loads((tmp_path / "outputs" / "bundle" / "manifest.json").read_text())
    entries = {r["variant"]: r for r in manifest["runs"]}
    assert entries["control"]["accepted"] is True
    assert entries["broken"]["accepted"] is False
    assert entries["broken"]["rejection"] == causes["broken"]
    # the verdict compares accepted runs only: the challengers gave nothing to compare
    assert data["verdict"]["verdict"] == "inconclusive"
    assert "broken's run was not accepted (deliverable not verified" in data["verdict"]["reason"]


@pytest.mark.slow
@needs("torch")
def test_word_language_model_transformer_saved_into_its_run_dir(tmp_path):
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {script_cmd("wlm_transformer.py", "--model", "Transformer",
                              "--save", "{run_dir}/model.pt")}
        minutes = 1

        [deliverables]
        files = ["model.pt"]
    """, metric="val_loss", direction="min",
        metrics='[metrics]\npreset = "pytorch_examples"\n')
    assert cli("check", str(path), cwd=tmp_path).returncode == 0
    proc = run_cli("run", "--headless", str(path), cwd=tmp_path, timeout=600)
    data = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
    verified = data["wrapup"]["verified"]
    rejections = {r["run_id"].split("-")[0]: r["cause"]
                  for r in data["budget"]["rejections"]}
    if verified:  # the bundle reloaded model.pt in a fresh process
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert data["budget"]["accepted"] == 1 and not rejections
        assert "bundle: outputs/bundle (verified)" in proc.stdout
    else:  # refused by the pickled-module allow-list (tui/training/pickled.py, issue 27):
        # then it is never counted, and headless does not say done
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert data["budget"]["accepted"] == 0
        assert rejections["control"].startswith("deliverable not verified: model.pt ")
        assert "NOT verified" in proc.stdout


# -- check catches sure failures -------------------------------------------------------------

CHECKED = """
[campaign]
name = "t"
question = "q"
metric = "{metric}"

[[lot]]
gpu = "cpu"
minutes = {minutes}
price_usd = 1.0

[[variant]]
id = "control"
category = "mandatory"
command = ["python", "{script}"]
minutes = 5

[metrics]
step = 'step (\\d+)'
acc = 'acc=(\\S+)'
"""


def _checked(tmp_path, script="train.py", metric="acc", minutes=20) -> Path:
    (tmp_path / "train.py").write_text("print('step 1 acc=0.5')\n")
    path = tmp_path / "campaign.toml"
    path.write_text(CHECKED.format(script=script, metric=metric, minutes=minutes))
    return path


def test_check_refuses_a_script_typo_and_a_metric_nobody_logs(tmp_path):
    good = _checked(tmp_path)
    assert cli("check", str(good)).returncode == 0
    typo = cli("check", str(_checked(tmp_path, script="trian.py")))
    assert typo.returncode == 2 and "Traceback" not in typo.stderr
    assert typo.stderr.strip().splitlines() == [
        'itera-tui: variant[0].command: control: python runs trian.py, which does not exist '
        "in the campaign folder (the runs' working directory) (did you mean \"train.py\"?)"]
    unlogged = cli("check", str(_checked(tmp_path, metric="accuracy")))
    assert unlogged.returncode == 2
    lines = unlogged.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(
        'itera-tui: campaign.metric: no run can report "accuracy": looked in [metrics] '
        "patterns (acc, loss, step); the scripts' code")
    assert "control's train.py" in lines[0]
    good = _checked(tmp_path)
    good.write_text(good.read_text().replace('price_usd = 1.0', 'price_usd = 1.0\ngpu_count = 1'))
    miss = cli("check", str(good))
    assert miss.returncode == 2
    assert 'lot[0].gpu_count: unknown key (did you mean "gpus"?)' in miss.stderr


def test_a_window_that_does_not_fit_exits_1_and_run_is_refused_without_allow_over(
        tmp_path, monkeypatch):
    def train_py(run):  # what train.py prints, then its exit 0
        run.print("step 1 acc=0.5")
        run.exit(0)
    procs = fake_host(monkeypatch, train_py)  # headless in this process, on fakes
    path = _checked(tmp_path, minutes=2)  # a 5-minute run in a 2-minute window
    text = cli("check", str(path))
    assert text.returncode == 1, text.stderr
    assert "DOES NOT FIT" in text.stdout and "advice (" in text.stdout
    data = cli("check", "--json", str(path))
    assert data.returncode == 1 and json.loads(data.stdout)["advice"]
    refused = cli("run", "--headless", str(path), cwd=tmp_path)
    assert refused.returncode == 1
    assert "DOES NOT FIT" in refused.stderr and "not starting" in refused.stderr
    assert "advice (drop_optional)" in refused.stderr or "advice (" in refused.stderr
    assert "--allow-over" in refused.stderr
    assert not (tmp_path / ".itera" / "ledger.jsonl").exists()  # nothing started
    assert not procs.runs  # nothing launched either
    allowed = cli("run", "--headless", "--allow-over", "--no-wrapup", str(path),
                  cwd=tmp_path)
    assert "starting anyway (--allow-over)" in allowed.stderr
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert state_of(path).runs_of("control", "run")[-1].state == "completed"


def test_default_reserves_are_scaled_to_the_window(tmp_path):
    plan = load_plan(_checked(tmp_path, minutes=20))
    assert plan.campaign.wrapup_hours == pytest.approx(1 / 60)  # 5% of 20 minutes
    assert plan.campaign.retrieval_hours == pytest.approx(1 / 60)
    long = tmp_path / "long"
    long.mkdir()
    assert load_plan(_checked(long, minutes=72 * 60)).campaign.wrapup_hours == 0.25


def test_one_unit_per_figure_and_no_negative_zero():
    from tui.campaign.units import short_hours, signed_hours

    assert signed_hours(-0.0001) == "+0 s"  # never "-0.0 h"
    assert signed_hours(-0.02) == "-1.2 min" and signed_hours(0.3) == "+18 min"
    assert signed_hours(-2.5) == "-2.5 h" and short_hours(0.5 / 60) == "30 s"


def test_near_misses_of_keys_and_choices_get_a_did_you_mean():
    from tui.campaign.validate import closest

    assert closest("gpu_count", ["id", "gpu", "gpus", "days", "hours", "price_usd"]) == "gpus"
    assert closest("price", ["gpu", "price_usd"]) == "price_usd"
    assert closest("warp_hours", ["wrapup_hours", "retrieval_hours"]) == "wrapup_hours"
    assert closest("zzz", ["gpus"]) is None


@pytest.mark.parametrize("argv,entry", [
    (("python", "-W", "ignore", "train.py"), ("script", "train.py")),
    (("python", "-u", "train.py", "--lr", "3"), ("script", "train.py")),
    (("torchrun", "--nproc_per_node", "2", "train.py"), ("script", "train.py")),
    (("accelerate", "launch", "--num_processes", "2", "train.py"), ("script", "train.py")),
    (("python", "-m", "pkg.train"), ("module", "pkg.train")),
    (("bash", "run.sh"), ("program", "bash")),
    # docs/campaign.md's own Lightning line, and HF_HUB_OFFLINE=1 for an offline box: `env`
    # hid the script, so check neither read it for its metrics nor saw it was missing
    (("env", "TTY_COMPATIBLE=1", "python", "train.py"), ("script", "train.py")),
    (("/usr/bin/env", "-u", "WANDB_API_KEY", "HF_HUB_OFFLINE=1", "torchrun",
      "--nproc_per_node", "2", "sft.py"), ("script", "sft.py")),
    (("env", "HF_HUB_OFFLINE=1", "bash", "run.sh"), ("program", "bash")),
])
def test_check_finds_the_script_a_command_runs(argv, entry):
    from tui.campaign.preflight import entry_of

    found = entry_of(argv)
    assert (found.kind, found.name) == entry


def test_headless_drop_of_the_last_challenger_warns_as_the_room_does(tmp_path, monkeypatch):
    fake_host(monkeypatch)  # headless in the test's process, its runs on fake processes
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {script_cmd("printer.py", "--steps", "3")}
        minutes = 1

        [[variant]]
        id = "b"
        category = "useful"
        command = {script_cmd("printer.py", "--steps", "3")}
        minutes = 1

        [pilot]
        steps = 3
    """)
    proc = cli("run", "--headless", "--decide", "drop:b", "--no-wrapup", str(path),
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "itera-tui: warning: b is the last challenger: " in proc.stderr
    assert state_of(path).dropped == {"b"}
