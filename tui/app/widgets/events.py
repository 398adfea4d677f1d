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
from ...engine.ledger import events
from ..format import event_clock
from .base import ModelPanel

MAX_LINES = 20_000  # held in the room; older ones are paged in from the ledger again
PAGE_EVENTS = 300  # read from the ledger per page when scrolled past the oldest held


def event_level(ev: events.Event) -> str:
    if isinstance(ev, (events.StopRuleFired, events.RunKilled)):
        return "stop"
    if isinstance(ev, events.WarningEvent) or (isinstance(ev, events.CheckpointVerified)
                                               and not ev.ok):
        return "warning"
    if isinstance(ev, (events.DecisionAsked, events.DecisionTaken, events.VariantDropped)):
        return "decision"
    if isinstance(ev, CHECKPOINT_EVENTS):
        return "checkpoint"
    return "info"


CHECKPOINT_EVENTS = (events.CheckpointRequested, events.CheckpointAcknowledged,
                     events.CheckpointVerificationStarted, events.CheckpointVerified,
                     events.CheckpointRotated)


class EventsLog(ModelPanel):
    """Newest at the bottom; zoomed (`z`), ↑/↓, PageUp/PageDown, Home/End scroll it, and
    scrolling past the oldest line held pages older events in from the ledger
    (`older`, set by the app), so the whole history can be read back."""

    can_focus = True
    BINDINGS = [("up,k", "scroll(1)", "Older line"), ("down,j", "scroll(-1)", "Newer line"),
                ("pageup", "page(1)", "Older page"), ("pagedown", "page(-1)", "Newer page"),
                ("home", "oldest", "Oldest"), ("end", "newest", "Newest")]
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
        self.back = 0  # lines hidden below the view (0: the newest is at the bottom)
        self.older = None  # (before_seq, limit) -> older events, oldest first; or None
        self._oldest_seq: int | None = None
        self._paging = False
        self.history_start = False  # the ledger has nothing older than what is held

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

    def add_event(self, ev: events.Event) -> bool:
        """A ledger event's line, once (by its box and seq: each box has its own ledger);
        another box's line starts with its box."""
        seq = (ev.box, ev.seq)
        if seq in self._seen_set:
            return False
        if len(self._seen) == self._seen.maxlen:
            self._seen_set.discard(self._seen[0])
        self._seen.append(seq)
        self._seen_set.add(seq)
        if not ev.box and (self._oldest_seq is None or ev.seq < self._oldest_seq):
            self._oldest_seq = ev.seq
        line = describe(ev)
        if not line:
            return False
        if ev.box:
            line = f"{ev.box}: {line}"
        self.add_line(ev.t, line, event_level(ev))
        return True

    def add_older(self, older: list[events.Event]) -> int:
        """A page of events older than every line held (oldest first), put above them;
        how many lines it added. An empty page: the history starts here."""
        lines = []
        for ev in older:
            if (None, ev.seq) in self._seen_set:
                continue
            if self._oldest_seq is None or ev.seq < self._oldest_seq:
                self._oldest_seq = ev.seq
            line = describe(ev)
            if line:
                lines.append((ev.t, line, event_level(ev)))
        if not older:
            self.history_start = True
        room = self.lines.maxlen - len(self.lines)
        for line in reversed(lines[-room:] if room > 0 else []):
            self.lines.appendleft(line)
        self.refresh()
        return min(len(lines), max(0, room))

    # -- scrolling ----------------------------------------------------------------
    def action_scroll(self, lines: int) -> None:
        if not self.has_class("zoomed") and lines in (1, -1):
            self.app.action_select(-lines)  # unzoomed, ↑/↓ still pick a run
            return
        self.scroll_by(lines)

    def action_page(self, pages: int) -> None:
        self.scroll_by(pages * max(1, self.size.height - 1))

    def action_oldest(self) -> None:
        self.scroll_by(len(self.lines))

    def action_newest(self) -> None:
        self.back = 0
        self.refresh()

    def scroll_by(self, lines: int) -> None:
        """Up (positive) or down; at the oldest line held, the next page is read."""
        top = max(0, len(self.lines) - 1)
        self.back = max(0, min(top, self.back + lines))
        if lines > 0 and self.back >= top - max(1, self.size.height) \
                and not self.history_start:
            self.page_in()
        self.refresh()

    def page_in(self) -> None:
        """Read the page before the oldest line held, off the UI thread."""
        if self.older is None or self._paging:
            return
        self._paging = True
        before, older = self._oldest_seq, self.older

        def read():
            try:
                events = older(before, PAGE_EVENTS)
            except Exception:  # a page that cannot be read: what is held stays shown
                events = []
            self.app.call_from_thread(self._paged, events)

        if self.is_mounted:
            self.run_worker(read, thread=True, group="events-page", exclusive=True)
        else:
            self._paging = False

    def _paged(self, events: list[dict]) -> None:
        self._paging = False
        self.add_older(events)

    def add_line(self, t: float, text: str, level: str = "info",
                 notice_s: float | None = None) -> None:
        self.lines.append((t, text, level))
        if self.back:  # scrolled back: the lines being read stay where they are
            self.back += 1
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
        self.back = max(0, min(self.back, len(self.lines) - 1))
        below = self.back
        if below:
            height -= 1  # the last row says how to get back to the newest
        held = list(self.lines)
        for line in reversed(held[:len(held) - below] if below else held):
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
        if below:
            start = "the ledger's first event is above; " if self.history_start else ""
            out.append(("\n" if shown else "") + f"↓ {below} newer line"
                       f"{'s' if below > 1 else ''} ({start}End: the newest)", time_style)
        return out

    def plain(self) -> str:
        return "\n".join(self.texts)
