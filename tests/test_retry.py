"""`[retry]` (issue 43): a run killed by the OOM killer (exit 137), an NCCL timeout or a
Xid error is a hiccup, not the variant's answer. A failed run that matches is relaunched
from its last verified checkpoint (ITERA_RESUME, the path a cut run takes) as a new
attempt with its own id, while the window can fit it; never a run a rule, a person or the
wrap-up stopped. The decision is pure (`tui.engine.retry.decide`) and rides on the run's
`run_exited`; the scheduler reads it from the replayed state. The real processes are in
test_retry_process.py.
"""

from __future__ import annotations

import json

import pytest

from clikit import check
from enginekit import control_only, printer_cmd, write_plan
from tui.campaign import load_plan
from tui.campaign.retry import RetryPolicy, exit_words
from tui.engine.ledger.state import replay
from tui.engine.retry import decide
from tui.engine.scheduler import next_intents, phase_of

RETRY = '\n[retry]\nmax = 2\non_exit = [137]\non_output = ["NCCL timeout", "Xid"]\n'
POLICY = RetryPolicy(max=2, on_exit=(137,), on_output=("NCCL timeout", "Xid"))


def run_of(*events):
    """The run `r` as the ledger tells it after `events` (its launch first)."""
    launched = {"seq": 1, "t": 1.0, "event": "run_launched", "run": "r", "target": "control",
                "kind": "run", "category": "mandatory", "attempt": 1, "config_hash": "h"}
    return replay([launched, *events]).run("r")


RULE_STOP = {"seq": 2, "t": 2.0, "event": "stop_rule_fired", "run": "r", "rule": "non_finite",
             "reason": "loss=nan at step 3", "value": "nan", "step": 3}


def person_stop(by):
    return {"seq": 2, "t": 2.0, "event": "run_stop_requested", "run": "r", "by": by,
            "reason": "asked", "deadline": 9.0}


@pytest.mark.parametrize("code, lines, said", [
    (-9, [], "retry 1 of 2 after exit -9 (killed by SIGKILL)"),  # the launcher's word
    (137, [], "retry 1 of 2 after exit 137 (SIGKILL as a shell reports it)"),
    (1, ["[rank0]: watchdog caught a collective timeout: nccl TIMEOUT"],  # any case
     "retry 1 of 2 after its output says 'NCCL timeout'"),
    (1, ["RuntimeError: NCCL timeout after 1800 s"],
     "retry 1 of 2 after its output says 'NCCL timeout'"),
    (1, ["NVRM: Xid (PCI:0000:3b:00): 79, GPU has fallen off the bus"],
     "retry 1 of 2 after its output says 'Xid'"),
    (1, ["ValueError: shapes do not match"], None),  # a bug: failed, not retried
    (-15, [], None),  # SIGTERM is not listed
    (0, ["Xid"], None),  # a run that succeeded is never retried
])
def test_a_listed_exit_status_or_text_is_a_hiccup_and_nothing_else_is(code, lines, said):
    got = decide(POLICY, run_of(), code, lines, retries_made=0)
    assert got.retried == said and got.not_retried is None


def test_minus_9_and_137_name_the_same_death_whichever_is_listed():
    assert decide(RetryPolicy(1, (-9,)), run_of(), 137, [], 0).retried
    assert decide(RetryPolicy(1, (137,)), run_of(), -9, [], 0).retried
    assert not decide(RetryPolicy(1, (9,)), run_of(), -9, [], 0).retried  # 9 is an exit 9
    assert exit_words(1) == "exit 1" and exit_words(None) == "no exit status"


@pytest.mark.parametrize("stop", [RULE_STOP, person_stop("user"), person_stop("wrapup"),
                                  person_stop("rule"), person_stop("pilot_bound")])
def test_a_run_stopped_by_a_rule_a_person_or_the_wrapup_is_never_retried(stop):
    """Even when its exit status is listed: the stop was asked for, it is no hiccup."""
    run = run_of(stop)
    got = decide(RetryPolicy(2, (137, -9, -15, 143)), run, -9, ["Xid"], retries_made=0)
    assert got.retried is None and got.not_retried is None


def test_a_hiccup_past_its_retries_or_the_window_is_left_failed_with_why():
    run = run_of()
    spent = decide(POLICY, run, -9, [], retries_made=2)
    assert spent.retried is None
    assert spent.not_retried == "exit -9 (killed by SIGKILL); its 2 retries already made"
    late = decide(POLICY, run, -9, [], 1, needed_s=3600.0, left_s=600.0)
    assert late.retried is None and late.not_retried == (
        "exit -9 (killed by SIGKILL); the window cannot fit another attempt: it needs about "
        "1 h, 10 min is left before the wrap-up")
    assert decide(POLICY, run, -9, [], 1, needed_s=500.0, left_s=600.0).retried == \
        "retry 2 of 2 after exit -9 (killed by SIGKILL)"
    ended = decide(POLICY, run, -9, [], 0, ending="the wrap-up has begun")
    assert ended.not_retried == "exit -9 (killed by SIGKILL); the wrap-up has begun"
    assert not decide(None, run, -9, [], 0).fields()
    assert not decide(RetryPolicy(0, (137,)), run, -9, [], 0).fields()


def _failed(retried, checkpoints=(), verified=()):
    """A plan-free ledger: the control's full run failed on a hiccup (`retried`)."""
    events = [{"seq": 2 + i, "t": 2.0, "event": "checkpoint_acknowledged", "run": "r",
               "path": path, "step": step} for i, (path, step) in enumerate(checkpoints)]
    events += [{"seq": 10 + i, "t": 3.0, "event": "checkpoint_verified", "run": "r",
                "path": path, "ok": True, "step": step} for i, (path, step) in
               enumerate(verified)]
    events.append({"seq": 20, "t": 4.0, "event": "run_exited", "run": "r", "exit_code": -9,
                   **({"retried": retried} if retried else {})})
    return events


def _plan(tmp_path, extra=RETRY):
    return load_plan(write_plan(tmp_path, control_only(printer_cmd()), extra),
                     check_files=False)


def _state(*events):
    launched = {"seq": 1, "t": 1.0, "event": "run_launched", "run": "r", "target": "control",
                "kind": "run", "category": "mandatory", "attempt": 1, "config_hash": "h"}
    return replay([launched, *events])


def test_the_scheduler_relaunches_a_retried_run_from_its_verified_checkpoint(tmp_path):
    plan = _plan(tmp_path)
    said = "retry 1 of 2 after exit -9 (killed by SIGKILL)"
    state = _state(*_failed(said, [("ckpt/a.pt", 10), ("ckpt/b.pt", 20)],
                            [("ckpt/a.pt", 10)]))
    assert state.run("r").to_retry and phase_of(plan, state) == "runs"
    assert next_intents(plan, state) == []  # b.pt still waits for its verdict
    state = _state(*_failed(said, [("ckpt/a.pt", 10), ("ckpt/b.pt", 20)],
                            [("ckpt/a.pt", 10), ("ckpt/b.pt", 20)]))
    (intent,) = next_intents(plan, state)
    resumes = intent.resumes
    assert (intent.target, intent.kind, resumes.run, resumes.checkpoint, resumes.retry) == \
        ("control", "run", "r", "ckpt/b.pt", 1)
    assert resumes.reason == f"{said}; resumes from the verified checkpoint at step 20"
    no_ckpt = next_intents(plan, _state(*_failed(said)))[0].resumes
    assert (no_ckpt.checkpoint, no_ckpt.reason) == (
        None, f"{said}; no verified checkpoint of it: started over")


def test_a_failure_not_retried_and_a_rule_stop_end_the_task(tmp_path):
    plan = _plan(tmp_path)
    failed = _state(*_failed(None))
    assert failed.run("r").state == "failed" and next_intents(plan, failed) == []
    assert phase_of(plan, failed) == "finished"
    stopped = _state(RULE_STOP, {"seq": 3, "t": 3.0, "event": "run_exited", "run": "r",
                                 "exit_code": -9, "retried": "retry 1 of 2 after exit -9"})
    assert stopped.run("r").state == "stopped" and not stopped.run("r").to_retry
    assert next_intents(plan, stopped) == [] and phase_of(plan, stopped) == "finished"


def test_check_accepts_explains_and_overrides_per_variant(tmp_path):
    variants = control_only(printer_cmd()) + f"""
[[variant]]
id = "wide"
category = "useful"
command = {printer_cmd()}
minutes = 1
retry = {{ max = 0 }}

[[variant]]
id = "deep"
category = "useful"
command = {printer_cmd()}
minutes = 1
retry = {{ on_output = ["CUDA error: an illegal memory access"] }}
"""
    path = write_plan(tmp_path, variants, RETRY)
    out = check(str(path))
    assert out.returncode == 0, out.stderr
    assert ("retry: [retry]: a failed run ending with exit 137 or -9 (killed by SIGKILL) or "
            "a last line containing 'NCCL timeout' or a last line containing 'Xid' is "
            "relaunched, at most 2 times, from its last verified checkpoint") in out.stdout
    assert "never a run stopped by a rule, a person or the wrap-up" in out.stdout
    assert "retry: variant wide: no retry (max = 0)" in out.stdout
    assert ("retry: variant deep: a failed run ending with exit 137 or -9 (killed by "
            "SIGKILL) or a last line containing 'CUDA error: an illegal memory access' is "
            "relaunched, at most 2 times") in out.stdout
    assert "variant control" not in out.stdout  # it keeps the campaign's own
    plan = load_plan(path)
    assert plan.retry_for("control") == POLICY == plan.retry
    assert plan.retry_for("wide").max == 0 and not plan.retry_for("wide").active
    assert plan.retry_for("deep").on_output == ("CUDA error: an illegal memory access",)
    data = json.loads(check("--json", str(path)).stdout)
    assert len(data["retry"]) == 3


@pytest.mark.parametrize("extra, said", [
    (RETRY.replace("on_output", "on_outptu"),
     'retry.on_outptu: unknown key (did you mean "on_output"?)'),
    (RETRY.replace("max", "maxx"), 'retry.maxx: unknown key (did you mean "max"?)'),
    ("\n[retri]\nmax = 1\n", 'retri: unknown key (did you mean "retry"?)'),
    (RETRY.replace("[137]", "[0]"), "retry.on_exit: 0 is no failure's exit status"),
    (RETRY.replace("[137]", '["137"]'), "retry.on_exit: expected an array of exit statuses"),
    (RETRY.replace('"Xid"', '""'), "retry.on_output: an empty text matches every line"),
    (RETRY.replace("max = 2", "max = 50"), "retry.max: at most 10 attempts after the first"),
    ("\n[retry]\nmax = 1\n", "retry: names no hiccup: give on_exit"),
])
def test_check_refuses_a_misspelt_key_or_a_bad_value_with_exit_2(tmp_path, extra, said):
    out = check(str(write_plan(tmp_path, control_only(printer_cmd()), extra)))
    assert out.returncode == 2 and said in out.stderr, out.stderr


def test_check_refuses_a_misspelt_key_of_a_variants_own_retry(tmp_path):
    variants = control_only(printer_cmd()) + "retry = { on_exitt = [137] }\n"
    out = check(str(write_plan(tmp_path, variants, RETRY)))
    assert out.returncode == 2, out.stderr
    assert 'variant[0].retry.on_exitt: unknown key (did you mean "on_exit"?)' in out.stderr


def test_the_notice_and_the_runs_table_say_a_retry_follows_or_why_not(tmp_path):
    from test_notify import compose_all, ev
    from tui.app.rows import state_text, stop_reason
    from tui.notify.notices import NoticeKind

    plan = _plan(tmp_path)
    launched = ev(1, "run_launched", run="r", target="control", kind="run",
                  category="mandatory", attempt=1, config_hash="h")
    said = "retry 1 of 2 after exit -9 (killed by SIGKILL)"
    (_, retried) = compose_all(plan, [launched, ev(2, "run_exited", run="r", exit_code=-9,
                                                   retried=said)])
    assert retried.kind == NoticeKind.FAILED and f"A hiccup: {said} follows" in retried.body
    assert "The queue goes on" not in retried.body
    (_, left) = compose_all(plan, [launched, ev(2, "run_exited", run="r", exit_code=-9,
                                                not_retried="exit -9; the wrap-up has begun")])
    assert "Not retried: exit -9; the wrap-up has begun. The queue goes on" in left.body

    state = _state(*_failed(said), {
        "seq": 30, "t": 5.0, "event": "run_launched", "run": "r2", "target": "control",
        "kind": "run", "category": "mandatory", "attempt": 2, "config_hash": "h",
        "resumes": "r", "retry": 1, "resume_reason": f"{said}; no verified checkpoint of "
                                                     "it: started over"})
    first, retry = state.run("r"), state.run("r2")
    assert state_text(first, first.state) == "✕ exit -9 ↻"
    assert stop_reason(first) == f"{said} follows"
    assert stop_reason(retry) == f"{said}; no verified checkpoint of it: started over"
    assert retry.to_dict()["retry_text"] == stop_reason(retry)
    assert "retry" not in _state().run("r").to_dict()  # a run without a hiccup: as before


def test_the_engine_reads_the_run_s_last_lines_and_the_window_and_never_blocks(tmp_path):
    """`retry_fields`: what the watcher adds to `run_exited`, from the run's own files."""
    import os

    from tui.engine.retry import retry_fields

    plan = _plan(tmp_path)
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    (run_dir / "stdout.log").write_text("step 1\n" + "noise\n" * 100)
    (run_dir / "stderr.log").write_text("NVRM: Xid 79\n" + "x\n" * 39)  # 40 lines back
    window = {"seq": 0, "t": 0.0, "event": "window_started", "start": 0.0, "end": 3600.0,
              "hours": 1.0}
    state = replay([window, {"seq": 1, "t": 1.0, "event": "run_launched", "run": "r",
                             "target": "control", "kind": "run", "category": "mandatory",
                             "attempt": 1, "config_hash": "h"}])
    run = state.run("r")
    assert retry_fields(plan, state, run, 1, run_dir, now=10.0) == {
        "retried": "retry 1 of 2 after its output says 'Xid'"}
    (run_dir / "stderr.log").write_text("NVRM: Xid 79\n" + "x\n" * 40)  # 41 lines back
    assert retry_fields(plan, state, run, 1, run_dir, now=10.0) == {}
    late = retry_fields(plan, state, run, -9, run_dir, now=3590.0)  # 1 min planned, 10 s left
    assert late["not_retried"].startswith("exit -9 (killed by SIGKILL); the window cannot fit")
    going = replay([window, {"seq": 1, "t": 1.0, "event": "run_launched", "run": "r",
                             "target": "control", "kind": "run", "category": "mandatory",
                             "attempt": 1, "config_hash": "h"},
                    {"seq": 2, "t": 2.0, "event": "box_going_down", "signal": "SIGTERM",
                     "grace_s": 5.0, "runs": ["r"]}])
    assert retry_fields(plan, going, going.run("r"), -9, run_dir, now=10.0) == {}  # cut
    wrapping = replay([window, {"seq": 1, "t": 1.0, "event": "run_launched", "run": "r",
                                "target": "control", "kind": "run", "category": "mandatory",
                                "attempt": 1, "config_hash": "h"},
                       {"seq": 2, "t": 2.0, "event": "wrapup_started"}])
    assert retry_fields(plan, wrapping, wrapping.run("r"), -9, run_dir, now=10.0) == {
        "not_retried": "exit -9 (killed by SIGKILL); the wrap-up has begun"}
    os.unlink(run_dir / "stderr.log")
    os.mkfifo(run_dir / "stderr.log")  # a run's FIFO: read as nothing, never waited on
    assert retry_fields(plan, state, run, 1, run_dir, now=10.0) == {}


def test_the_report_shows_each_attempt_and_what_the_hiccups_cost(tmp_path):
    from tui.bundle.report import _budget, _runs_table
    from tui.campaign.pricing import RetriedAttempt, deliverable_budget

    plan = _plan(tmp_path)
    said = "retry 1 of 2 after exit -9 (killed by SIGKILL)"
    b = deliverable_budget(1.0, 0.0, ["control:h"],
                           retried=[RetriedAttempt("control-h-1", said, 0.25, 0.25)])
    assert b.to_dict()["retried_usd"] == 0.25
    assert (f"- Hiccups retried (`[retry]`): 1 failed attempt retried, 0.25 GPU-h (0.25 USD "
            f"of the rental): control-h-1: {said} (0.25 GPU-h, 0.25 USD of the rental)"
            ) in _budget(plan, b)
    assert "retried" not in deliverable_budget(1.0, 0.0, []).to_dict()  # as it always read
    rows = _runs_table("acc", [
        {"id": "control-h-1", "variant": "control", "kind": "run", "category": "mandatory",
         "state": "failed", "stop": None, "retry_text": f"{said} follows"},
        {"id": "control-h-2", "variant": "control", "kind": "run", "category": "mandatory",
         "state": "completed", "stop": None, "retry_text": f"{said}; resumes from the "
         "verified checkpoint at step 8"}])
    assert f"| failed | {said} follows |" in rows[4]
    assert "| completed | " + said + "; resumes from the verified checkpoint at step 8 |" \
        in rows[5]


def test_check_says_when_the_calendar_s_slack_cannot_hold_a_retry(tmp_path):
    roomy = check(str(write_plan(tmp_path, control_only(printer_cmd()), RETRY)))
    assert "calendar's slack" not in roomy.stdout
    tight = tmp_path / "tight"
    tight.mkdir()
    out = check(str(write_plan(tight, control_only(printer_cmd(), minutes=50), RETRY)))
    assert ("retry: the calendar's slack (4.0 min) is shorter than control's full run (50 min): "
            "a retry from the start would not fit, one from a late checkpoint may"
            ) in out.stdout, out.stdout
