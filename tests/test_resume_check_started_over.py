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


def test_a_script_that_starts_over_fails_although_its_losses_match(monkeypatch):
    monkeypatch.setattr(resume_check, "run_leg", _legs(resumes=False))
    with pytest.raises(resume_check.CheckFailed, match="started over instead of resuming at "
                                                      "step 10: it logged a loss at step 1"):
        resume_check.check(["train"], 10, 10, 0.0, 60.0)
