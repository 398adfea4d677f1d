"""The campaign's answer as the report words it: the verdict against "the bar".

The verdict itself (yes / no / inconclusive, and why) is the engine's, shared
with the control room and `status` (tui.engine.verdict); this writes it with
the figures of the conclusion (each full run's final decision-metric value,
the one the runs table shows) and says "the bar (gain >= min_gain)": a
threshold is named only when `[campaign] threshold` is set.
"""

from __future__ import annotations

from ..campaign.plan import Plan
from ..engine.outcome import Conclusion
from ..engine.verdict import Verdict


def bar_text(plan: Plan) -> str:
    c = plan.campaign
    bound = (f" and {c.metric} {'>=' if c.direction == 'max' else '<='} {c.threshold:g}"
             if c.threshold is not None else "")
    return f"the bar (gain >= {c.min_gain:g}{bound})"


def answer_text(plan: Plan, conclusion: Conclusion, answer: Verdict) -> str:
    """The verdict in one line, its figures from the conclusion (the values shown in the
    runs table: each full run's final decision-metric value)."""
    if answer.kind == "inconclusive":
        return f"**inconclusive**: {answer.reason}"
    c, control = plan.campaign, conclusion.control_value
    sign = 1 if c.direction == "max" else -1
    if answer.kind == "yes" and conclusion.winners and control is not None:
        parts = ", ".join(f"{v} ({c.metric} {conclusion.values[v]:.4g} vs control "
                          f"{control:.4g})" for v in conclusion.winners)
        verb = "meets" if len(conclusion.winners) == 1 else "meet"
        return f"**answered yes**: {parts} {verb} {bar_text(plan)}"
    if control is None:
        return f"**answered {answer.kind}**: {answer.reason}"
    rivals = {v: x for v, x in conclusion.values.items() if v != c.control and x is not None}
    head = (f"**answered no**: no variant meets {bar_text(plan)} against the control "
            f"({c.metric} {control:.4g})")
    if not rivals:
        return head + "; no challenger completed a full run to compare (stopped by a stop rule)"
    best = max(rivals, key=lambda v: sign * (rivals[v] - control))
    return head + (f"; best {best} {rivals[best]:.4g}, gain "
                   f"{sign * (rivals[best] - control):+.4g} < {c.min_gain:g}")
