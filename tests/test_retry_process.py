"""`[retry]` with real processes (issue 43): the control's first attempt saves a verified
checkpoint and dies by SIGKILL (exit -9, listed as 137 the way a shell says it); the
engine relaunches it from that checkpoint (ITERA_RESUME) as attempt 2 with its own id,
and the campaign concludes on that retry, both attempts in `status --json` and the
retried one's GPU time in the budget. A challenger stopped by the `non_finite` rule, whose
SIGTERM exit (-15) is listed too, is not retried. The decision itself: test_retry.py.
"""

from __future__ import annotations

import contextlib
import io
import json

import pytest

from enginekit import drive, printer_cmd, script_cmd, write_plan
from tui.engine.ledger.file import read_ledger
from tui.engine.ledger.state import replay
from tui.service.status import print_status, status_dict

pytestmark = pytest.mark.slow

VARIANTS = f"""
[[variant]]
id = "control"
category = "mandatory"
command = {script_cmd("resumable.py", "--steps", "20", "--die-at", "8", "--sleep", "0.02",
                      "--acc", "0.7")}
minutes = 1

[[variant]]
id = "nan"
category = "useful"
command = {printer_cmd("--steps", "400", "--nan-at", "5", "--sleep", "0.05")}
minutes = 1
"""
RULES = """
[[stop]]
rule = "non_finite"
metrics = ["loss"]

[retry]
max = 2
on_exit = [137, -15]
on_output = ["Xid"]
"""
SAID = "retry 1 of 2 after exit -9 (killed by SIGKILL)"


def test_a_run_killed_once_is_retried_from_its_verified_checkpoint_and_concludes(tmp_path):
    path = write_plan(tmp_path, VARIANTS, RULES, gpus=2)
    drive(path, timeout=240, verifications=True)
    state = replay(read_ledger(tmp_path / ".itera" / "ledger.jsonl"))

    first, retry = state.runs_of("control", "run")
    assert (first.state, first.exit_code, first.retried) == ("failed", -9, SAID)
    checkpoint = first.last_verified_checkpoint
    assert checkpoint is not None and checkpoint.step == 8
    assert (retry.state, retry.retry, retry.attempt, retry.resumes, retry.resume_from) == \
        ("completed", 1, 2, first.id, checkpoint.path)
    assert retry.id != first.id and retry.config_hash == first.config_hash
    assert retry.resume_reason == f"{SAID}; resumes from the verified checkpoint at step 8"
    printed = (tmp_path / ".itera" / "runs" / retry.id / "stdout.log").read_text()
    assert "resumed from step 8" in printed and "step 20 acc=0.7" in printed

    (nan,) = state.runs_of("nan", "run")  # stopped by a rule: its -15 is listed, no retry
    assert nan.state == "stopped" and nan.stop.rule == "non_finite"
    assert nan.retried is None and nan.not_retried is None

    data = status_dict(path)
    runs = {r["id"]: r for r in data["runs"]}
    assert runs[first.id]["retry_text"] == f"{SAID} follows"
    assert runs[retry.id]["retry"] == 1 and runs[retry.id]["retry_text"] == retry.resume_reason
    assert "retry" not in runs[nan.id] and "retry_text" not in runs[nan.id]
    assert data["conclusion"]["values"]["control"] == pytest.approx(0.7)  # the retry's figure
    assert data["verdict"]["verdict"] != "pending"
    budget = data["budget"]
    assert budget["accepted"] == 1 and budget["accepted_configs"] == [
        f"control:{retry.config_hash}"]
    assert first.id not in {r["run_id"] for r in budget["rejections"]}  # judged on its retry
    (cost,) = budget["retried"]
    assert cost["run_id"] == first.id and cost["cause"] == SAID and cost["gpu_hours"] > 0
    assert json.loads(json.dumps(data, default=str))["budget"]["retried_usd"] >= 0

    from tui.campaign import load_plan
    from tui.session.ending import ending_of

    lines = ending_of(load_plan(path), state, now=state.runs[-1].ended_t).lines()
    assert any(line.startswith("budget: 1 failed attempt retried") for line in lines)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print_status(path)
    assert f"{first.id}" in out.getvalue() and f"{SAID} follows" in out.getvalue()
    assert "budget: 1 failed attempt retried" in out.getvalue()
