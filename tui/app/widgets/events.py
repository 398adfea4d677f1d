"""Events log: stop rules, decisions, checkpoints and warnings, newest at the bottom.

Lines come from the ledger (`tui.engine.events.describe`) and from the app's own
health warnings. Each ledger event is shown once even when it arrives both from
the history read at start and from the live relay (deduplicated by `seq`).
Lines are kept as data (a bounded deque) and laid out at draw time, so a tmux
pane that is resized shows full lines again; only the newest that fit are drawn.
Run ids are shown as the runs table names them (`control·pilot`), so a line and
its row read alike in an 80-column pane; the run screen (enter) has the id.
"""

from __future__ import annotations

import re
from collections import deque

from rich.text import Text

from ...engine.events import describe
from ..format import event_clock
from .base import ModelPanel

MAX_LINES = 500


def event_level(ev: dict) -> str:
    kind = ev.get("event", "")
    if kind == "stop_rule_fired" or kind == "run_killed":
        return "stop"
    if kind == "warning" or (kind == "checkpoint_verified" and not ev.get("ok")):
        return "warning"
    if kind.startswith("decision") or kind == "variant_dropped":
        return "decision"
    if kind.startswith("checkpoint"):
        return "checkpoint"
    return "info"


class EventsLog(ModelPanel):
    can_focus = True
    COMPONENT_CLASSES = {"events--stop", "events--warning", "events--decision",
                         "events--checkpoint", "events--info", "events--time"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines: deque[tuple[float, str, str]] = deque(maxlen=MAX_LINES)
        self._seen: deque[int] = deque(maxlen=2048)
        self._seen_set: set[int] = set()
        self.labels: dict[str, str] = {}
        self._pattern = None

    def set_labels(self, labels: dict[str, str]) -> None:
        """Run id -> label; lines are rewritten when drawn, so history gets them too."""
        if labels != self.labels:
            self.labels = dict(labels)
            ids = sorted(self.labels, key=len, reverse=True)
            self._pattern = re.compile("|".join(map(re.escape, ids))) if ids else None
            self.refresh()

    def named(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: self.labels[m.group(0)], text)

    def add_event(self, ev: dict) -> bool:
        seq = ev.get("seq")
        if isinstance(seq, int):
            if seq in self._seen_set:
                return False
            if len(self._seen) == self._seen.maxlen:
                self._seen_set.discard(self._seen[0])
            self._seen.append(seq)
            self._seen_set.add(seq)
        line = describe(ev)
        if not line:
            return False
        self.add_line(ev.get("t", 0.0), line, event_level(ev))
        return True

    def add_line(self, t: float, text: str, level: str = "info") -> None:
        self.lines.append((t, text, level))
        self.refresh()

    @property
    def texts(self) -> list[str]:
        return [f"[{event_clock(t)}] {self.named(text)}" for t, text, _ in self.lines]

    def render(self) -> Text:
        height = max(1, self.size.height)
        out = Text(no_wrap=True, overflow="ellipsis")
        shown = list(self.lines)[-height:]
        time_style = self.style_of("events--time")
        for i, (t, text, level) in enumerate(shown):
            if i:
                out.append("\n")
            out.append(event_clock(t) + " ", time_style)
            out.append(self.named(text), self.style_of(f"events--{level}"))
        return out

    def plain(self) -> str:
        return "\n".join(self.texts)
