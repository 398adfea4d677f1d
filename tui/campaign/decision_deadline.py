"""`check` refuses a decision deadline the window cannot afford.

`[pilot] decide_after_minutes` bounds how long the GPUs wait for a person at
the decision point (the engine takes the default then). The calendar plans
`decision_hours` for that human interval (bounded by the deadline); waiting
up to the deadline beyond it must fit in the calendar's slack, or the
campaign could end after the window before the engine even decides.
"""

from __future__ import annotations

from .calendar import Calendar
from .plan import Plan
from .units import human_duration


def deadline_problem(plan: Plan, calendar: Calendar) -> str | None:
    """Why `[pilot] decide_after_minutes` is refused, if it is: waiting that long at the
    decision point would take more than the calendar's slack (the campaign would end
    after the window before the engine even decides)."""
    pilot = plan.pilot
    if pilot is None or pilot.decide_after_minutes is None:
        return None
    deadline_h = pilot.decide_after_minutes / 60.0
    planned_h = calendar.entry("decision").task.hours
    if deadline_h - planned_h <= max(0.0, calendar.slack_hours) + 1e-9:
        return None
    most = (planned_h + max(0.0, calendar.slack_hours)) * 60.0
    return (f"pilot.decide_after_minutes: a {human_duration(deadline_h * 3600)} deadline "
            f"can keep the GPUs waiting {human_duration((deadline_h - planned_h) * 3600)} "
            f"beyond the calendar, more than its slack "
            f"({human_duration(max(0.0, calendar.slack_hours) * 3600)}): the campaign would "
            f"end after the window; give at most {most:.4g} minutes")
