"""Which ledger events interrupt a person, and with what words.

Only what needs a person raises a toast: a stop rule (with a bell, so tmux
marks the window), a failed verification or one asked for with `c`, and
warnings. Scheduled checkpoints and routine events stay in the events log;
at 80x24 a toast for each of them once covered the decision modal.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..campaign.loading.sections import rule_label
from ..engine.ledger import events


@dataclass(frozen=True)
class Toast:
    """A notification to show, one at a time under the runs table."""
    text: str
    title: str
    severity: str
    timeout: float
    bell: bool = False


def toast_for(ev: events.Event, awaiting_checkpoint: set[str]) -> Toast | None:
    if isinstance(ev, events.StopRuleFired):
        return Toast(f"{ev.run}: {rule_label(ev.rule)} = {ev.value} — {ev.reason}", "stop rule fired",
                     "error", 20, bell=True)
    if isinstance(ev, events.CheckpointVerified) and (not ev.ok
                                                      or ev.run in awaiting_checkpoint):
        awaiting_checkpoint.discard(ev.run)
        return Toast(f"checkpoint of {ev.run} "
                     + ("verified" if ev.ok else f"FAILED verification: {ev.problem}"),
                     "checkpoint", "information" if ev.ok else "error", 15)
    if isinstance(ev, events.WarningEvent):
        return Toast(ev.message, "warning", "warning", 20)
    return None
