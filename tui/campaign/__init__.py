"""The campaign plan: schema, loader, calendar, pricing and advice (stdlib only).

This layer answers "does this campaign fit the window and what does it cost?"
before a single GPU hour is spent. It imports nothing outside the stdlib so it
can be tested, and used by every other layer, without textual or torch.
"""

from ..lazy import lazy_exports

_HOMES = {
    "advise": "advice", "Calendar": "calendar", "Entry": "calendar",
    "build_calendar": "calendar", "place": "calendar", "load_plan": "loading.load",
    "plan_from_dict": "loading.load", "CATEGORIES": "plan", "Plan": "plan", "StopRule": "plan",
    "Variant": "plan", "CATALOG": "pricing", "Cost": "pricing",
    "DeliverableBudget": "pricing", "Rejection": "pricing",
    "deliverable_budget": "pricing", "plan_cost": "pricing", "check_summary": "summary",
    "render_check": "summary", "PlanError": "validate",
}

__all__ = sorted(_HOMES)
# each name loads its own module on first use: the control room's first frame needs
# the plan and the calendar, not the advice, the prices or `check`
__getattr__ = lazy_exports(__name__, globals(), _HOMES)
