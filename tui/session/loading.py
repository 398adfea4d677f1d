"""The plan a session drives, loaded without loading the engine.

A client of the engine process (the room, a CLI action) needs the plan to lay
out its screens and to validate what a person typed, and nothing of the
engine; this module is that entry point.
"""

from __future__ import annotations


def load_campaign(path, check_files: bool = True):
    """The plan a session drives: `campaign.toml`, calibrated from its prior bundle when
    it names one (before the start); after the start, the frozen `.itera/plan.toml`
    (its recorded calibration applied by the loader) with the keys of campaign.toml
    edited since (`edited_keys`, campaign.frozen). Loading a started plan reads no
    bundle."""
    from ..campaign.frozen import load_started_plan

    plan = load_started_plan(path, check_files=check_files)
    if (plan.state_dir / "plan.toml").is_file() or plan.campaign.prior is None:
        return plan
    from ..bundle.prior import prior_plan  # reading and verifying the prior bundle

    return prior_plan(plan)
