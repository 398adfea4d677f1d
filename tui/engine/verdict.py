"""The campaign's answer in one word: yes, no, or inconclusive, and why.

A "no" must be earned: every challenger that was not dropped ran its full run
to the end, or was stopped by one of the announced stop rules (a diverged
variant is an answer). A challenger stopped by a person or by the wrap-up, one
that failed or never ran, leaves the question open: that is "inconclusive",
never a firm no. Shared by the control room, headless, `status` and the report.
"""

from __future__ import annotations

from dataclasses import dataclass

ANSWERING_STOPS = ("non_finite", "threshold", "truncation", "resume", "stall")
VERDICTS = ("yes", "no", "inconclusive")


@dataclass(frozen=True)
class Verdict:
    kind: str  # yes | no | inconclusive
    reason: str

    @property
    def text(self) -> str:
        word = {"yes": "answered yes", "no": "answered no",
                "inconclusive": "inconclusive"}[self.kind]
        return f"{word}: {self.reason}"

    def to_dict(self) -> dict:
        return {"verdict": self.kind, "reason": self.reason}


def verdict_of(plan, state, conclusion) -> Verdict:
    """`conclusion`: tui.engine.outcome.Conclusion of the same state."""
    if not conclusion.conclusive:
        return Verdict("inconclusive", conclusion.text.removeprefix("inconclusive: "))
    if conclusion.winners:
        return Verdict("yes", conclusion.text)
    control = plan.campaign.control
    challengers = [v for v in plan.variants if v.id != control and v.id not in state.dropped]
    if not challengers:
        return Verdict("inconclusive", "every challenger was dropped: nothing was compared "
                                       "with the control")
    open_ = []
    for v in challengers:
        runs = state.runs_of(v.id, "run")
        last = runs[-1] if runs else None
        if last is None:
            decided = state.decided
            why = ("wrap-up decided at the decision point" if decided
                   and decided.decision == "wrapup" else "not reached before the wrap-up")
            open_.append(f"{v.id} never ran ({why})")
        elif last.state == "completed":
            continue
        elif last.state == "stopped" and last.stop is not None \
                and last.stop.rule in ANSWERING_STOPS:
            continue  # an announced stop rule is an answer for that variant
        else:
            open_.append(f"{v.id} {last.state} ({last.why_ended})")
    if open_:
        return Verdict("inconclusive", "; ".join(open_))
    return Verdict("no", conclusion.text)
