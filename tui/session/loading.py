"""The plan a session drives, loaded without loading the engine.

A client of the engine process (the room, a CLI action) needs the plan to lay
out its screens and to validate what a person typed, and nothing of the
engine; this module is that entry point.
"""

from __future__ import annotations


def load_campaign(path, check_files: bool = True):
    """The plan a session drives: `campaign.toml`, calibrated from its prior bundle
    when it names one (before the start), or as the frozen plan recorded it (after)."""
    from ..campaign import load_plan

    plan = load_plan(path, check_files=check_files)
    frozen = plan.state_dir / "plan.toml"
    if plan.campaign.prior is None and not (frozen.is_file()
                                            and b"[calibration]" in frozen.read_bytes()):
        return plan  # no prior, none recorded: the bundle layer need not even load
    from ..bundle.prior import campaign_plan

    return campaign_plan(plan)
