"""The campaign plan: schema, loader, calendar, pricing and advice (stdlib only).

This layer answers "does this campaign fit the window and what does it cost?"
before a single GPU hour is spent. It imports nothing outside the stdlib so it
can be tested, and used by every other layer, without textual or torch.
"""

from .advice import advise
from .calendar import Calendar, Entry, build_calendar, place
from .load import load_plan, plan_from_dict
from .plan import CATEGORIES, Plan, StopRule, Variant
from .pricing import (CATALOG, Cost, DeliverableBudget, Rejection, deliverable_budget,
                      plan_cost)
from .summary import check_summary, render_check
from .validate import PlanError

__all__ = ["advise", "Calendar", "Entry", "build_calendar", "place", "load_plan",
           "plan_from_dict", "CATEGORIES", "Plan", "StopRule", "Variant", "CATALOG", "Cost",
           "DeliverableBudget", "Rejection", "deliverable_budget", "plan_cost",
           "check_summary", "render_check", "PlanError"]
