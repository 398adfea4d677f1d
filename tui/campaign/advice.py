"""Advice when the plan does not fit its window.

Three honest options, each with the figures behind it: the next longer lot
for the same GPU (catalog price, new slack); a second lot, only when
independent runs could use it (it does not shorten a single run nor merge GPU
memory, so the calendar is recomputed rather than halved); and a reduced
protocol that drops optional variants, lowest priority first, until it fits.
"""

from __future__ import annotations

from dataclasses import replace

from .calendar import Calendar, build_calendar
from .plan import CATEGORY_RANK, Plan
from .pricing import catalog_durations, money
from .units import short_hours, signed_hours


def advise(plan: Plan, calendar: Calendar | None = None) -> list[dict]:
    calendar = calendar or build_calendar(plan)
    if calendar.fits:
        return []
    found = [a for a in (*_longer_lots(plan, calendar), _second_lot(plan, calendar),
                         _drop_optional(plan, calendar)) if a]
    gpu = plan.lots[0].gpu if plan.lots else "the GPU"
    return found or [{"kind": "revise", "fits": False,
                      "text": f"no longer catalog lot for {gpu} and no optional variant "
                              "to drop: give the lot more hours or days, or plan shorter runs"}]


def _longer_lots(plan: Plan, calendar: Calendar) -> list[dict]:
    out = []
    for lot in plan.lots:
        for days, price in catalog_durations(lot.gpu):
            hours = days * 24.0
            if hours <= lot.hours:
                continue
            new_slack = round(max(hours, plan.window_hours) - calendar.end_to_end_hours, 6)
            out.append({"kind": "longer_lot", "lot": lot.id, "gpu": lot.gpu, "days": days,
                        "price_usd": price, "extra_usd": money(price - lot.price_usd),
                        "window_hours": hours, "new_slack_hours": new_slack,
                        "fits": new_slack >= 0,
                        "text": f"take the {days}-day {lot.gpu} lot at {price:.2f} USD: "
                                f"slack becomes {signed_hours(new_slack)}"})
            if new_slack >= 0:
                break
        if out:
            break
    return out


def _independent_runs(plan: Plan) -> bool:
    runs = [v for v in plan.variants]
    for a in runs:
        for b in runs:
            if a.id < b.id and b.id not in a.after and a.id not in b.after:
                return True
    return False


def _second_lot(plan: Plan, calendar: Calendar) -> dict | None:
    if not _independent_runs(plan) or not plan.lots:
        return None
    base = plan.lots[0]
    extra = replace(base, id=f"{base.id}-2")
    wider = build_calendar(plan.with_lots(plan.lots + (extra,)))
    if wider.end_to_end_hours >= calendar.end_to_end_hours - 1e-9:
        return None
    slack = round(plan.window_hours - wider.end_to_end_hours, 6)
    return {"kind": "second_lot", "gpu": base.gpu, "days": base.days,
            "price_usd": base.price_usd,
            "total_lots_usd": money(sum(l.price_usd for l in plan.lots) + base.price_usd),
            "new_end_to_end_hours": wider.end_to_end_hours, "new_slack_hours": slack,
            "fits": slack >= 0,
            "text": f"a second {base.gpu} lot ({base.price_usd:.2f} USD) runs independent "
                    f"variants side by side: end to end {short_hours(wider.end_to_end_hours)}, "
                    f"slack {signed_hours(slack)} (it does not shorten a single run nor merge "
                    "GPU memory)"}


def _drop_optional(plan: Plan, calendar: Calendar) -> dict | None:
    optional = sorted((v for v in plan.variants if v.optional),
                      key=lambda v: (-CATEGORY_RANK[v.category], -v.priority))
    if not optional:
        return None
    dropped: list[str] = []
    current = calendar
    for v in optional:
        dropped.append(v.id)
        current = build_calendar(plan.without_variants(set(dropped)))
        if current.fits:
            break
    return {"kind": "drop_optional", "drop": dropped,
            "new_end_to_end_hours": current.end_to_end_hours,
            "new_slack_hours": current.slack_hours, "fits": current.fits,
            "text": f"reduced protocol without {', '.join(dropped)}: end to end "
                    f"{short_hours(current.end_to_end_hours)}, slack "
                    f"{signed_hours(current.slack_hours)}"
                    + ("" if current.fits else " (still over: the question needs revising)")}
