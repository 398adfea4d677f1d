"""The resume check refuses a script that starts over instead of resuming (issue 41 walk).

A deterministic script that ignores ITERA_RESUME trains again from step 1 in run C
and logs, after the checkpoint's step, exactly run A's losses: the check said
"passed (30 steps compared, max diff 0.0)" for a script that cannot resume at all.
In-process: the legs are stand-ins writing what such runs write.
"""

import json

import pytest

from tui.training import resume_check


def _legs(resumes: bool):
    """A run_leg stand-in: A trains 1..20, B 1..10 with a checkpoint at 10, C 11..20 when
    it resumes, 1..20 (the same losses) when it starts over."""
    def run_leg(name, cmd, root, extra_env, timeout):
        run_dir = root / name
        run_dir.mkdir()
        first = 11 if name == "C" and resumes else 1
        last = int(extra_env["ITERA_MAX_STEPS"])
        lines = [{"step": s, "loss": 1.0 / s} for s in range(first, last + 1)]
        if name == "B":
            lines.append({"event": "checkpoint", "step": 10, "path": "ckpt.pt"})
        (run_dir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
        return run_dir
    return run_leg


def test_a_script_that_resumes_passes(monkeypatch):
    monkeypatch.setattr(resume_check, "run_leg", _legs(resumes=True))
    assert resume_check.check(["train"], 10, 10, 0.0, 60.0) == (10, 0.0)


def test_a_script_that_resumes_and_evaluates_what_it_loaded_passes(monkeypatch):
    """A loss logged at the checkpoint's own step (the model it loaded, evaluated) is not
    starting over."""
    legs = _legs(resumes=True)

    def run_leg(name, cmd, root, extra_env, timeout):
        run_dir = legs(name, cmd, root, extra_env, timeout)
        if name == "C":
            with open(run_dir / "metrics.jsonl", "a") as out:
                out.write(json.dumps({"step": 10, "loss": 0.1}) + "\n")
        return run_dir

    monkeypatch.setattr(resume_check, "run_leg", run_leg)
    assert resume_check.check(["train"], 10, 10, 0.0, 60.0) == (10, 0.0)


def test_a_script_that_starts_over_fails_although_its_losses_match(monkeypatch):
    monkeypatch.setattr(resume_check, "run_leg", _legs(resumes=False))
    with pytest.raises(resume_check.CheckFailed, match="started over instead of resuming at "
                                                      "step 10: it logged a loss at step 1"):
        resume_check.check(["train"], 10, 10, 0.0, 60.0)


def test_a_check_that_failed_before_comparing_says_why_not_max_diff_none():
    from tui.engine.ledger.events import ResumeCheckResult

    failed = ResumeCheckResult(run="rc-1", ok=False, steps_compared=0, max_abs_diff=None,
                               problem="run C started over instead of resuming at step 30")
    assert failed.describe() == ("resume check FAILED for rc-1: run C started over instead "
                                 "of resuming at step 30")
    passed = ResumeCheckResult(run="rc-1", ok=True, steps_compared=30, max_abs_diff=0.0)
    assert passed.describe() == "resume check passed for rc-1 (30 steps compared, max diff 0.0)"
