"""Which ledger events interrupt a person, and with what words.

Only what needs a person raises a toast: a stop rule (with a bell, so tmux
marks the window), a failed verification or one asked for with `c`, and
warnings. Scheduled checkpoints and routine events stay in the events log;
at 80x24 a toast for each of them once covered the decision modal.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Toast:
    """A notification to show, one at a time under the runs table."""
    text: str
    title: str
    severity: str
    timeout: float
    bell: bool = False


def toast_for(ev: dict, awaiting_checkpoint: set[str]) -> Toast | None:
    kind = ev.get("event")
    if kind == "stop_rule_fired":
        return Toast(f"{ev.get('run')}: {ev.get('rule')} = {ev.get('value')} — "
                     f"{ev.get('reason')}", "stop rule fired", "error", 20, bell=True)
    if kind == "checkpoint_verified" and (not ev.get("ok")
                                          or ev.get("run") in awaiting_checkpoint):
        awaiting_checkpoint.discard(ev.get("run"))
        ok = ev.get("ok")
        return Toast(f"checkpoint of {ev.get('run')} "
                     + ("verified" if ok else f"FAILED verification: {ev.get('problem')}"),
                     "checkpoint", "information" if ok else "error", 15)
    if kind == "warning":
        return Toast(str(ev.get("message")), "warning", "warning", 20)
    return None
