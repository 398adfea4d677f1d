"""The notices' own thread: fed by the ledger, never in the engine's way.

The engine's loop only puts each relevant ledger event on a bounded queue
(`put_nowait`: it never waits, and an overflow is counted, not blocking).
This thread composes the notices, applies the rate limit (the same kind and
run at most once per `quiet_minutes`, and at most `BURST` of a kind in that
time; what was held back is counted in the next one), and delivers each to
every address with retries and a growing pause. A notice that could not be
delivered is one ledger warning, `notice not delivered: ...`, naming it once
with each address (redacted) and why: never a stop, a crash or a slower rule.
Closing waits a bounded time for what is queued, then names what was lost.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections import deque
from typing import Callable

from ..campaign.notify_plan import NoticeKind, redact_url
from .delivery import Addresses, Delivery, deliver, resolve_addresses
from ..engine.ledger import events
from .notices import COMPOSED, NOT_DELIVERED, Composer, Notice

INTAKE_MAX = 1000  # events waiting to be composed; beyond: counted and said once
BURST = 3  # notices of one kind per quiet period
BACKOFF_S = 1.0  # the pause after a failed attempt, doubled each time
DRAIN_S = 10.0  # what closing waits for queued notices, at most
WINDOW_CHECK_S = 5.0  # how often the window is looked at (monotonic seconds)
EVENTS = frozenset(COMPOSED)  # the event classes a notice may be composed from


class RateLimit:
    """At most one notice per key per `quiet_s`, and `burst` per kind (ledger time)."""

    def __init__(self, quiet_s: float, burst: int = BURST):
        self.quiet_s = quiet_s
        self.burst = burst
        self._last: dict[str, float] = {}
        self._kind_times: dict[NoticeKind, deque] = {}
        self._held: dict[NoticeKind, int] = {}

    def allow(self, notice: Notice) -> bool:
        t = notice.t
        last = self._last.get(notice.key)
        times = self._kind_times.setdefault(notice.kind, deque())
        while times and t - times[0] >= self.quiet_s:
            times.popleft()
        if (last is not None and t - last < self.quiet_s) or len(times) >= self.burst:
            self._held[notice.kind] = self._held.get(notice.kind, 0) + 1
            return False
        self._last[notice.key] = t
        times.append(t)
        if len(self._last) > 4096:  # a campaign of days: keep the recent keys only
            for key in sorted(self._last, key=self._last.get)[:2048]:
                del self._last[key]
        return True

    def held_back(self, kind: NoticeKind) -> int:
        """How many of `kind` were held back since the last one sent (and reset)."""
        return self._held.pop(kind, 0)


class Notices:
    """Started by the session before the engine opens, closed before it closes."""

    def __init__(self, plan, engine, clock: Callable[[], float] = time.time,
                 ending: Callable | None = None, *, environ=None,
                 send: Callable[[str, str, str], Delivery] = deliver,
                 drain_s: float = DRAIN_S, backoff_s: float | None = None):
        self.plan = plan
        self.notify = plan.notify
        self.engine = engine
        self.clock = clock
        self.send = send
        self.drain_s = drain_s
        # read when the sender is made (a test of lost notices shortens it, never skips it)
        self.backoff_s = BACKOFF_S if backoff_s is None else backoff_s
        self.addresses: Addresses = resolve_addresses(self.notify, os.environ
                                                      if environ is None else environ)
        self.composer = Composer(plan, engine.snapshot, ending,
                                 lambda: engine.journal.report.events, clock)
        self.limit = RateLimit(self.notify.quiet_minutes * 60.0)
        self._intake: queue.Queue = queue.Queue(maxsize=INTAKE_MAX)
        self._overflow = 0
        self._closing = threading.Event()  # no more events: drain, then end
        self._abandon = threading.Event()  # the drain time is over: send nothing more
        self._lock = threading.Lock()
        self._closed = False
        self._in_flight: Notice | None = None
        self._window_told = False
        self._history_read = False
        self._next_window_check = 0.0
        self._said_problems = False
        self.sent: deque[Notice] = deque(maxlen=100)  # the last delivered (to one address+)
        self._thread = threading.Thread(target=self._run, name="itera-notices", daemon=True)

    # -- the engine's side: cheap and never blocking -------------------------------
    def start(self) -> "Notices":
        self.engine.subscribe(self._on_event)
        self._thread.start()
        return self

    def _on_event(self, ev: events.Event) -> None:
        if self._closing.is_set() or type(ev) not in EVENTS:
            return
        if isinstance(ev, events.WarningEvent) and ev.message.startswith(NOT_DELIVERED):
            return
        try:
            self._intake.put_nowait(ev)
        except queue.Full:
            self._overflow += 1

    def close(self) -> None:
        """Wait up to `drain_s` for what is queued; name what could not be sent."""
        self._closing.set()
        self._thread.join(self.drain_s)
        self._abandon.set()
        self._thread.join(5.0)  # an attempt under way ends at its own timeout
        leftovers = []
        if self._thread.is_alive() and self._in_flight is not None:
            leftovers.append((self._in_flight, "the engine stopped while it was being sent"))
        while True:
            try:
                ev = self._intake.get_nowait()
            except queue.Empty:
                break
            notice = self._compose(ev)
            if (notice is not None and self.addresses.urls and self.notify.sends(notice.kind)
                    and self.limit.allow(notice)):  # only what would have been sent is lost
                leftovers.append((notice, "the engine stopped before it could be sent"))
        with self._lock:
            self._closed = True  # from here on the thread, if still alive, writes nothing
        for notice, why in leftovers:
            self._lost(notice, why, closing=True)

    # -- the thread ---------------------------------------------------------------
    def _run(self) -> None:
        try:  # loaded now, while the engine opens, not when the first stop rule fires
            import apprise  # noqa: F401
        except ImportError:
            pass  # each lost notice will say so
        while not (self._closing.is_set() and self._intake.empty()):
            try:
                ev = self._intake.get(timeout=0.2)
            except queue.Empty:
                ev = None
            try:
                self._say_problems()
                if ev is not None:
                    notice = self._compose(ev)
                    if notice is not None:
                        self._handle(notice)
                self._check_window()
            except Exception as exc:  # the notices must never take the engine down
                self._warn(f"{NOT_DELIVERED}the notices thread hit {type(exc).__name__}: "
                           f"{exc}")

    def _compose(self, ev: events.Event) -> Notice | None:
        try:
            return self.composer.compose(ev)
        except Exception as exc:  # a notice lost to a bug is said, never raised
            self._warn(f"{NOT_DELIVERED}(a notice for {ev.KIND}) could not be "
                       f"composed: {type(exc).__name__}: {exc}")
            return None

    def _say_problems(self) -> None:
        if self._said_problems or not self.engine.journal.opened:
            return
        self._said_problems = True
        for problem in self.addresses.problems:
            self._warn(f"{NOT_DELIVERED}(every notice) {problem}")
        if not self.addresses.urls:
            self._warn(f"{NOT_DELIVERED}(every notice) no usable address in [notify] "
                       f"({self.notify.sources})")

    def _check_window(self) -> None:
        if self._window_told or time.monotonic() < self._next_window_check:
            return
        self._next_window_check = time.monotonic() + WINDOW_CHECK_S
        if not self.engine.journal.opened:
            return
        if not self._history_read:  # told before this engine started: not again
            self._history_read = True
            if any(isinstance(e, events.NoticeSent) and e.kind == NoticeKind.WINDOW.value
                   for e in self.composer.history()):
                self._window_told = True
                return
        notice = self.composer.window_ending(self.clock(),
                                             self.notify.window_lead_minutes * 60.0)
        if notice is not None:
            self._window_told = True
            self._handle(notice)
            try:  # once per campaign, not once per engine start
                self.engine.record_notice(NoticeKind.WINDOW.value)
            except Exception:  # a ledger that cannot take it: perhaps told twice, no more
                pass

    def _handle(self, notice: Notice) -> None:
        if not self.notify.sends(notice.kind) or not self.limit.allow(notice):
            return
        held = self.limit.held_back(notice.kind)
        if held:
            notice = Notice(notice.kind, notice.title, f"{notice.body}\n(+{held} more like "
                            f"this in the last {self.notify.quiet_minutes:g} min, not sent)",
                            notice.key, notice.t)
        if self._overflow:
            lost, self._overflow = self._overflow, 0
            self._warn(f"{NOT_DELIVERED}{lost} event(s) not looked at: the notices queue "
                       f"was full ({INTAKE_MAX})")
        self._deliver(notice)

    def _deliver(self, notice: Notice) -> None:
        if not self.addresses.urls:
            return  # said once at start: no address to lose it to
        self._in_flight = notice
        failures = []
        for url in self.addresses.urls:
            result = self._attempts(url, notice)
            if not result.ok:
                failures.append(f"{redact_url(url)}: {result.reason}")
        self._in_flight = None
        if len(failures) < len(self.addresses.urls):
            self.sent.append(notice)
        if failures:
            self._lost(notice, "; ".join(failures))

    def _attempts(self, url: str, notice: Notice) -> Delivery:
        result = Delivery(False, "not tried: the engine was stopping")
        pause, tried = self.backoff_s, 0
        for attempt in range(self.notify.attempts):
            if self._abandon.is_set():
                break
            result = self.send(url, notice.title, notice.body)
            tried += 1
            if result.ok:
                return result
            if attempt + 1 < self.notify.attempts and self._abandon.wait(pause):
                break
            pause *= 2
        tries = f" ({tried} attempts)" if tried > 1 else ""
        return Delivery(False, result.reason + tries)

    def _lost(self, notice: Notice, why: str, closing: bool = False) -> None:
        self._warn(f"{NOT_DELIVERED}{notice.name}: {why}", closing)

    def _warn(self, message: str, closing: bool = False) -> None:
        with self._lock:
            if self._closed and not closing:
                return
        try:
            self.engine.warn(message)
        except OSError:  # LedgerUnwritable is one: the notice is lost, not the engine, and the
            pass  # engine itself stops on that ledger and says so
