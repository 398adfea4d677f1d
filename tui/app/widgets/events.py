"""Events log: stop rules, decisions, checkpoints and warnings, newest at the bottom.

Lines come from the ledger (`tui.engine.ledger.lines.describe`) and from the app's own
health warnings. Each ledger event is shown once even when it arrives both from
the history read at start and from the live relay (deduplicated by `seq`).
Lines are kept as data (a bounded deque) and laid out at draw time, so a tmux
pane that is resized shows full lines again; only the newest that fit are drawn.
Run ids are shown as the runs table names them (`control·pilot`), so a line and
its row read alike in an 80-column pane; the run screen (enter) has the id.
A line too long for the pane ends in `…`; zoomed (`z`) the log wraps, so every
line is whole. A notice (`toasts.py`) is a line drawn marked (`◆`, reversed)
until its time is up: notices live here, never over another panel.
"""

from __future__ import annotations

import re
import time
from collections import deque

from rich.text import Text

from ...engine.ledger.lines import describe
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
                         "events--checkpoint", "events--info", "events--time",
                         "events--notice"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.lines: deque[tuple[float, str, str]] = deque(maxlen=MAX_LINES)
        self._seen: deque[int] = deque(maxlen=2048)
        self._seen_set: set[int] = set()
        self.labels: dict[str, str] = {}
        self._pattern = None
        self._marked: dict[int, float] = {}  # id of a line tuple -> monotonic end of its mark

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
        """A ledger event's line, once (by its box and seq: each box has its own ledger);
        another box's line starts with its box."""
        seq = ev.get("seq")
        if isinstance(seq, int):
            seq = (ev.get("box"), seq)
            if seq in self._seen_set:
                return False
            if len(self._seen) == self._seen.maxlen:
                self._seen_set.discard(self._seen[0])
            self._seen.append(seq)
            self._seen_set.add(seq)
        line = describe(ev)
        if not line:
            return False
        if ev.get("box"):
            line = f"{ev['box']}: {line}"
        self.add_line(ev.get("t", 0.0), line, event_level(ev))
        return True

    def add_line(self, t: float, text: str, level: str = "info",
                 notice_s: float | None = None) -> None:
        self.lines.append((t, text, level))
        if notice_s:
            self.mark_newest(notice_s)
        self.refresh()

    def mark_newest(self, seconds: float) -> None:
        """Draw the newest line marked for `seconds` (a notice)."""
        if not self.lines:
            return
        now = time.monotonic()
        self._marked = {k: v for k, v in self._marked.items() if v > now}
        self._marked[id(self.lines[-1])] = now + seconds
        self.refresh()
        if self.is_mounted:
            self.set_timer(seconds + 0.05, self.refresh)

    def marked(self, line) -> bool:
        return self._marked.get(id(line), 0.0) > time.monotonic()

    @property
    def notices(self) -> list[str]:
        """The lines marked now, as shown (tests)."""
        return [self.named(text) for line in self.lines if self.marked(line)
                for _, text, _ in [line]]

    @property
    def texts(self) -> list[str]:
        return [f"[{event_clock(t)}] {self.named(text)}" for t, text, _ in self.lines]

    def render(self) -> Text:
        height = max(1, self.size.height)
        width = max(1, self.size.width)
        wrap = self.has_class("zoomed")  # zoomed: every line whole, wrapped
        shown, used = [], 0
        for line in reversed(self.lines):
            rows = -(-(len(event_clock(line[0])) + 1 + len(self.named(line[1]))) // width) \
                if wrap else 1
            if shown and used + rows > height:
                break
            shown.append(line)
            used += rows
        out = Text(no_wrap=not wrap, overflow="fold" if wrap else "ellipsis")
        time_style = self.style_of("events--time")
        for i, line in enumerate(reversed(shown)):
            t, text, level = line
            if i:
                out.append("\n")
            style = self.style_of(f"events--{level}")
            if self.marked(line):
                out.append("◆ ", self.style_of("events--notice"))
                style = style + self.style_of("events--notice")
            out.append(event_clock(t) + " ", time_style)
            out.append(self.named(text), style)
        return out

    def plain(self) -> str:
        return "\n".join(self.texts)
