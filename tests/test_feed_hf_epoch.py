"""HF log dicts read from stdout get their true step (issue 34, item 5).

The Trainer prints `{'loss': '3.91', ..., 'epoch': '0.08333'}` with no step; its
bar (none at all with `disable_tqdm`) is another file, read after. The step of
such a dict is its own `epoch` times the trainer's steps per epoch, read from
the `trainer_state.json` of a checkpoint it saved; the figures are drawn from
those records, never "no loss recorded" for a loss that was printed.
"""

from __future__ import annotations

import json

import pytest

from conftest import needs
from enginekit import drive, script_cmd
from test_frameworks_campaign import campaign
from tui.bundle.plots import read_series
from tui.campaign import load_plan
from tui.engine.reading.feeds import FeedKind, recorded_sources


def test_epoch_steps_come_from_the_trainers_own_log_history(tmp_path):
    from tui.engine.reading.printed import EpochSteps

    folder = tmp_path / "out" / "checkpoint-6"
    folder.mkdir(parents=True)
    history = [{"step": s, "epoch": s / 12, "loss": 1.0} for s in range(1, 7)]
    (folder / "trainer_state.json").write_text(json.dumps({"log_history": history}))
    epochs = EpochSteps(tmp_path)
    assert [epochs.step_of(e) for e in (0.08333, 0.1667, 0.25, 0.5)] == [1, 2, 3, 6]
    assert epochs.step_of(float("nan")) is None and epochs.step_of(0.0) is None
    assert EpochSteps(tmp_path / "nothing").step_of(0.25) is None  # no state: no guess


@pytest.mark.slow
@needs("transformers")
def test_printed_hf_dicts_take_the_true_step_and_draw_their_figure(tmp_path):
    path = campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {script_cmd("hf_train.py", "--steps", "12", "--save-steps", "4",
                              "--no-callback", "--output-dir", "{run_dir}/hf-out")}
        minutes = 5

        [metrics]
        preset = "hf_trainer"
    """)
    engine = drive(path, timeout=300)
    (run,) = engine.state.runs
    assert run.state == "completed"
    plan = load_plan(path, check_files=False)
    run_dir = plan.state_dir / "runs" / run.id
    state = json.loads((run_dir / "hf-out" / "checkpoint-12" / "trainer_state.json").read_text())
    true_steps = [e["step"] for e in state["log_history"] if "loss" in e]
    assert true_steps == list(range(1, 13))
    stream = recorded_sources(run_dir, plan.metrics, frozenset({"loss"}))[FeedKind.PRINTED]
    printed = [r for r in stream if "loss" in r]
    assert [r.get("global_step") for r in printed] == true_steps  # not "no step yet"
    series = read_series(plan, run_dir, "loss")
    assert [s for s, _ in series] == true_steps  # the figure has its twelve points


def _bar(step: int, total: int = 40) -> bytes:
    return f"\r{100 * step // total:3d}%|##        | {step}/{total} [00:01<00:02,  2.2it/s]".encode()


CLEAR = b"\r" + b" " * 46 + b"\r"  # tqdm.write clears the bar, then redraws it


def test_before_any_save_the_bars_redraw_after_each_dict_dates_it(tmp_path):
    """No trainer_state.json yet: HF prints each dict with tqdm.write (stdout), which clears
    and redraws the bar (stderr) at the step just logged. The stdout of a poll is read
    before its stderr, so the bar read then ran ahead and the one read before lagged: the
    dict is dated once stderr is read, by its redraw. Steps per epoch 16, logging and
    evaluation every 10 steps: the evaluation bar's own clear (`leave=False`) is followed
    by a training step that is no dict's; the first two dicts share an epoch, so only the
    third confirms the steps per epoch."""
    from tui.campaign.presets import build_spec
    from tui.engine.reading.feeds import RunFeeds

    out, err = tmp_path / "stdout.log", tmp_path / "stderr.log"
    out.write_bytes(b""), err.write_bytes(b"")
    feeds = RunFeeds(tmp_path, build_spec("hf_trainer"))
    dated: list[tuple[float, int | None]] = []

    def write(stdout: bytes, stderr: bytes) -> None:
        with out.open("ab") as f:
            f.write(stdout)
        with err.open("ab") as f:
            f.write(stderr)

    def poll():
        for _, batch in feeds.poll():
            dated.extend((r["epoch"], r.get("global_step")) for r in batch if "epoch" in r)

    for step in range(1, 41):
        write(b"", _bar(step))
        if step % 10 == 0:
            epoch = f"{step / 16:.4g}"
            write(f"{{'loss': '3.9', 'grad_norm': 'nan', 'epoch': '{epoch}'}}\n".encode(),
                  CLEAR + _bar(step))
            write(f"{{'eval_loss': '3.8', 'epoch': '{epoch}'}}\n".encode(),
                  b"\r  0%|          | 0/8 [00:00<?, ?it/s]\x1b[A" + CLEAR + CLEAR + b"\x1b[A"
                  + _bar(step) + b"\r100%|##########| 8/8 [00:00<00:00]\x1b[A" + CLEAR
                  + b"\x1b[A")
        if step % 7 == 0:
            poll()  # polls fall anywhere: several dicts in one, or none
    poll()
    assert dated == [(s / 16 if s % 16 else s // 16, s) for s in (10, 10, 20, 20, 30, 30,
                                                                  40, 40)]
    for step in (50, 60):  # confirmed: a dict whose redraw is not read yet is dated too
        write(f"{{'loss': '3.9', 'epoch': '{step / 16:.4g}'}}\n".encode(), b"")
    poll()
    assert [s for _, s in dated[-2:]] == [50, 60]
    assert feeds.epochs.per_epoch == pytest.approx(16, abs=1e-3)


def test_a_reason_names_the_record_where_no_step_was_ever_printed(tmp_path):
    from tui.campaign.presets import build_spec
    from tui.engine.reading.feeds import FeedKind, recorded_sources
    from tui.engine.rules import where

    (tmp_path / "stdout.log").write_text(
        "{'loss': '3.9', 'epoch': '0.5'}\n" * 11 + "{'loss': 'nan', 'epoch': '1'}\n")
    records = list(recorded_sources(tmp_path, build_spec("hf_trainer"))[FeedKind.PRINTED])
    assert where(records[-1]) == "at record 12 of stdout (no step printed)"
