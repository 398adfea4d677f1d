"""The campaign's answer as the report words it: the verdict against "the bar".

The verdict itself (yes / no / inconclusive, and why) is the engine's, shared
with the control room and `status` (tui.engine.conclusion.verdict); this writes it with
the figures of the conclusion (each full run's final decision-metric value,
the one the runs table shows) and says "the bar (gain >= min_gain)": a
threshold is named only when `[campaign] threshold` is set.
"""

from __future__ import annotations

from ..campaign.plan import Plan
from ..engine.conclusion.outcome import Conclusion, bar_words, missed_bar
from ..engine.conclusion.verdict import Verdict


def bar_text(plan: Plan) -> str:
    return f"the bar ({bar_words(plan)})"


def answer_text(plan: Plan, conclusion: Conclusion, answer: Verdict) -> str:
    """The verdict in one line, its figures from the conclusion (the values shown in the
    runs table: each full run's final decision-metric value)."""
    if answer.kind in ("inconclusive", "pending"):
        return f"**{answer.kind}**: {answer.reason}"
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
    return head + f"; best {best} {rivals[best]:.4g}, {missed_bar(plan, rivals[best], control)}"


def ablation_caveat(plan: Plan, conclusion: Conclusion, answer: Verdict) -> str | None:
    """When the answer rests on a variant whose ablation check warned (it changes more
    than one factor against the control, say), the sentence that says so: a "no" or a
    "yes" from it does not tell which change did it."""
    if answer.kind not in ("yes", "no"):
        return None
    from ..campaign.ablation import ablation

    found = ablation(plan)
    rests_on = set(conclusion.winners) if answer.kind == "yes" else {
        v for v in conclusion.values if v != plan.campaign.control}
    warned = [(v.variant, v.warnings) for v in found.variants
              if v.variant in rests_on and v.warnings]
    if not warned:
        return None
    said = "; ".join(f"{vid}: {'; '.join(w)}" for vid, w in warned)
    which = "variants" if len(warned) > 1 else "a variant"
    return (f"this answer rests on {which} whose ablation check warned ({said}): it does "
            "not say which change made the difference")
