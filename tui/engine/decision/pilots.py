"""What the decision point says of each pilot: what happened up to its bound.

A pilot that crashed, produced no decision-metric value by its bound or was
ended by a stop rule (even past its bound, while a script that ignores the
stop request kept printing) is marked with the reason in words; a crash
carries its cause (the exception line of its stderr, `conclusion.crash`) and the
last lines of its stderr. When the control's own pilot failed,
"continue" would spend the full runs on what will most likely fail the same
way: `continue_warning` says so, for the room's decision modal and for
headless `--decide continue` alike.
"""

from __future__ import annotations

from pathlib import Path

from ..conclusion.crash import failure_cause, last_error_lines


def pilot_note(plan, run, final_metric: float | None, run_dir: Path) -> dict:
    """The pilot's problem (None when it is a figure to compare) and, for a crash,
    the last lines of its stderr; merged into the ledger's `decision_pending` figures."""
    if run.state == "running":
        return {"problem": "still running", "crash": []}
    if run.state == "failed":
        crash, cause = last_error_lines(run_dir, 3), failure_cause(run_dir)
        return {"problem": f"failed (exit {run.exit_code})"
                + (f": {cause}" if cause else ""), "crash": crash}
    if run.stop is not None and not run.rules_apply:
        return {"problem": f"stopped by {run.stop.rule}: {run.stop.reason}", "crash": []}
    if final_metric is None:
        return {"problem": f"no {plan.campaign.metric} value by its bound", "crash": []}
    return {"problem": None, "crash": []}


def control_pilot_failed(plan, pilot: dict) -> str | None:
    """The control pilot's problem when it failed (crashed or exited non-zero)."""
    fig = pilot.get(plan.campaign.control)
    if isinstance(fig, dict) and fig.get("state") == "failed":
        return str(fig.get("problem") or "failed")
    return None


def continue_warning(plan, pilot: dict) -> str | None:
    """What "continue" risks, from the decision point's pilot figures; None when the
    control's pilot did not fail."""
    problem = control_pilot_failed(plan, pilot)
    if problem is None:
        return None
    return (f"the control's pilot {problem}: the full runs will likely fail the same way "
            "(check the command, then continue, or wrap up)")
