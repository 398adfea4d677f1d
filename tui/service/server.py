"""The engine as a service: one loop that drives the campaign, one socket for its clients.

Modelled on tmux's server: the process that owns the campaign (the engine
lock, the ledger, the runs) keeps driving it whatever its clients do. A
client (the room, a CLI action, `status`, a bridge from another box) says
`hello`, subscribes to the event stream from the last ledger seq it saw (so a
reconnect misses nothing) and to snapshots, and sends actions, answered with
the same `ActionResult` a face in this process would get.

Threads: the caller's thread runs `serve()` (this module): it steps the
session, runs the actions in arrival order and publishes snapshots. The rest
lives by idea beside it: the sockets and their bounded output (hub.py, its
own I/O thread), when a snapshot crosses (snapshots.py), whether the engine
wraps up by itself (wrapup_policy.py). The decision point, its held "continue"
included, is the engine's (engine/decision/point.py): the loop only says whether
a held "continue" the engine would not take ends a headless run.
"""

from __future__ import annotations

import enum
import os
import signal
import threading
import time
from collections import Counter, deque
from pathlib import Path
from typing import Callable

from ..session.snapshot import ActionResult
from .hub import MAX_BACKLOG, Client, SocketHub  # noqa: F401  (MAX_BACKLOG: its home is hub.py)
from .outbox import OutboxLimits
from ..engine.ledger import events
from .protocol import (PROTOCOL_VERSION, Action, ActionKind, Reply, Subscribe, encode,
                       event_message)
from .snapshots import IDLE_POLL_S, SnapshotThrottle, first_frame
from .wrapup_policy import WrapupPolicy, Wrapups

# An action burst never starves the stop rules: every pass of the loop ticks the engine
# (its rules) first, then takes at most this many requests, at most a few per client, so
# a pass costs a bounded number of ledger writes whatever the clients send.
REQUESTS_PER_TICK = 32
REQUESTS_PER_CLIENT_PER_TICK = 8
WAITING_PER_CLIENT = 32  # a client's requests still waiting; past it, refused at once
SUPERSEDED_SIGNAL = "superseded"  # box_going_down's signal when another box took over


class ServeEnd(str, enum.Enum):
    """Why `serve()` returned."""
    FINISHED = "finished"  # the campaign ended (and was wrapped up, per the policy)
    AWAITING_DECISION = "awaiting_decision"  # headless: a decision nobody can answer
    SHUTDOWN = "shutdown"  # asked to stop (an action, a signal)
    IDLE = "idle"  # done, and no client for the idle timeout
    HELD = "held"  # headless: "continue" held back, the control's pilot failed
    BOX_DOWN = "box_down"  # the system announced the box's end: runs checkpointed, gone
    SUPERSEDED = "superseded"  # another box took the campaign (store lease): runs stopped


class EngineService:
    def __init__(self, session, socket_file: Path, *, poll_interval: float = 0.25,
                 wrapup: WrapupPolicy = WrapupPolicy.ONCE, exit_at_decision: bool = False,
                 idle_exit_s: float | None = None, on_line: Callable[[str], None] | None = None,
                 on_error: Callable[[str], None] | None = None, hold_continue: bool = True,
                 clock: Callable[[], float] = time.monotonic,
                 outbox_limits: OutboxLimits = OutboxLimits()):
        self.session = session
        self.socket_file = Path(socket_file)
        self.poll_interval = poll_interval
        self.wrapups = Wrapups(session, wrapup, on_line)
        self.exit_at_decision = exit_at_decision
        self.idle_exit_s = idle_exit_s
        self.on_line = on_line
        self.on_error = on_error or on_line  # every tick error shown, once while it lasts
        self._said_error: str | None = None
        session.engine.decision.hold_continue(hold_continue)
        self.monotonic = clock
        self.hub = SocketHub(self.socket_file, self._hello, self._submit, clock,
                             limits=outbox_limits, say=self._say,
                             encode_event=event_message)
        self._requests: deque = deque()  # (client, request), in arrival order
        self._requests_lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self.snapshots = SnapshotThrottle(self.hub, clock, self._say)
        self._last_snap = None  # the last step's snapshot: a new face's first frame at once
        self._box_down: str | None = None  # the signal that announced the box's end
        self._stop_signalled = False  # SIGINT/SIGHUP: set by `signalled`, lock-free
        self._box_notice: str | None = None  # a provider's notice, in its words
        # what the notice's provider is told once the checkpoints are in (Azure's
        # Scheduled Events: StartRequests lets the box go at once), or None
        self._box_then: Callable[[], str] | None = None

    @property
    def wrapup(self) -> WrapupPolicy:
        return self.wrapups.policy

    @property
    def held_warning(self) -> str | None:
        """Why the held "continue" was not taken (the control's pilot failed), if so."""
        return self.session.engine.decision.held_warning

    # -- the socket -----------------------------------------------------------------
    def listen(self) -> None:
        """Bind the owner-only socket and follow the ledger for the subscribers."""
        self._plan_toml = self._plan_text()  # read here, not on the I/O thread at each hello
        self.hub.listen()
        self.session.subscribe(self._on_event)

    def say_bye(self, reason: str) -> None:
        """Tell every client why the engine goes (before `close`), so a room says it."""
        self.hub.say_bye(reason)

    def close(self) -> None:
        self._stop.set()
        self.hub.close()

    def client_count(self) -> int:
        return self.hub.client_count()

    def _submit(self, client: Client, request) -> None:
        """A subscription or an action, for the loop's thread (called on the I/O thread):
        a client that already has `WAITING_PER_CLIENT` waiting is refused at once, in
        words, without the engine seeing it."""
        with self._requests_lock:
            if client.waiting >= WAITING_PER_CLIENT:
                refused = True
            else:
                refused = False
                client.waiting += 1
                self._requests.append((client, request))
        if refused:
            why = (f"refused: {WAITING_PER_CLIENT} requests from this client are still "
                   "waiting for the engine, which runs its stop rules before any action; "
                   "wait for their answers before sending more")
            if isinstance(request, Action):
                self._send(client, {"op": "result", "id": request.id, "ok": False,
                                    "message": why})
            else:
                self._send(client, {"op": "error", "message": why})
            return
        self._wake.set()

    def _take_requests(self) -> list:
        """This pass's requests: the oldest first, at most `REQUESTS_PER_TICK`, at most
        `REQUESTS_PER_CLIENT_PER_TICK` of any one client (the rest wait their turn, in
        order), so one flooding client never holds back another's."""
        taken: list = []
        per: Counter = Counter()
        skipped: list = []
        with self._requests_lock:
            queue = self._requests
            while queue and len(taken) < REQUESTS_PER_TICK:
                client, request = queue.popleft()
                if per[id(client)] >= REQUESTS_PER_CLIENT_PER_TICK:
                    skipped.append((client, request))
                    continue
                per[id(client)] += 1
                client.waiting -= 1
                taken.append((client, request))
            queue.extendleft(reversed(skipped))
        return taken

    def requests_waiting(self) -> int:
        with self._requests_lock:
            return len(self._requests)

    def _plan_text(self) -> str:
        """The frozen plan a far room lays out (written at the engine's open, never again)."""
        plan = self.session.plan
        try:
            return (plan.state_dir / "plan.toml").read_text(encoding="utf-8")
        except OSError:
            return plan.path.read_text(encoding="utf-8")

    def _hello(self) -> dict:
        plan = self.session.plan
        return {"op": "hello", "protocol": PROTOCOL_VERSION, "engine_pid": os.getpid(),
                "campaign": plan.campaign.name, "plan_toml": self._plan_toml,
                "folder": plan.root.name, "events": self.session.engine.state.events,
                "finished": self._over()}

    def _over(self) -> bool:
        """The campaign is finished and its wrap-up is not to come or still going: this
        engine has nothing left to drive (`engine status`, `engine start` say so)."""
        from .lifetime import nothing_left

        engine = self.session.engine
        return nothing_left(engine.finished, self.session.wrapup_running, engine.state.wrapup,
                            self.wrapups.policy is WrapupPolicy.NEVER)

    def _send(self, client: Client, message: dict | bytes) -> None:
        self.hub.send(client, message)

    # -- events out ----------------------------------------------------------------------
    def _on_event(self, ev: events.Event) -> None:
        """A new ledger event (from whichever thread recorded it), to every subscriber."""
        seq = ev.seq
        data = None
        with self.hub.lock:
            for client in self.hub.clients.values():
                if not client.subscribed or (isinstance(seq, int) and seq <= client.last_seq):
                    continue
                if isinstance(seq, int):
                    client.last_seq = seq
                if client.replay:  # still catching up: after the events it is owed
                    self.hub.queue_events(client, [ev])
                    continue
                if data is None:
                    data = event_message(ev)
                self._send(client, data)
        self._wake.set()

    def _subscribe(self, client: Client, request: Subscribe) -> None:
        journal = self.session.engine.journal
        with self.hub.lock:
            if request.from_seq is None:
                past = journal.recent(request.history) if request.history else []
            else:
                past = self._events_after(request.from_seq)
            self.hub.queue_events(client, past)  # encoded as the client reads
            last = past[-1].seq if past else None
            if not isinstance(last, int):
                recent = journal.recent(1)
                last = recent[-1].seq if recent else -1
            client.last_seq = last if isinstance(last, int) else -1
            if request.from_seq is not None:
                client.last_seq = max(client.last_seq, request.from_seq)
            client.subscribed, client.snapshots = True, request.snapshots
            if request.snapshots and self._last_snap is not None:
                self._send(client, first_frame(self._last_snap))
        self.snapshots.whole_next()  # a new face: at once, whole

    def _events_after(self, seq: int) -> list[events.Event]:
        journal = self.session.engine.journal
        recent = journal.recent(10 ** 9)
        if recent and recent[0].seq <= seq + 1:
            return [ev for ev in recent if ev.seq > seq]
        from ..engine.ledger.file import read_ledger  # further back than memory: the file

        return [ev for ev in read_ledger(journal.path) if ev.seq > seq]

    def _say(self, text: str) -> None:
        if self.on_line is not None:
            self.on_line(text)

    def _publish(self, snap, force: bool = False) -> None:
        self.snapshots.publish(snap, force)

    # -- actions in ----------------------------------------------------------------------
    def _run_requests(self) -> bool:
        """This pass's subscriptions and actions, in arrival order (bounded:
        `_take_requests`); True when one asked to shut down."""
        shutdown = False
        for client, request in self._take_requests():
            if client.closing:
                continue  # gone while it waited: nobody to answer
            if isinstance(request, Subscribe):
                try:
                    self._subscribe(client, request)
                except Exception as exc:  # one client's bad luck never takes the engine
                    self._say(f"a client's subscription failed: {type(exc).__name__}: {exc}")
                    self._send(client, {"op": "error", "message": "subscription failed: "
                                        f"{type(exc).__name__}"})
                    client.closing = True
                continue
            reply = self._act(request, events.DecidedBy.of_client(client.name))
            self._send(client, {"op": "result", "id": reply.id, "ok": reply.ok,
                                "message": reply.message})
            if request.kind is ActionKind.SHUTDOWN and reply.ok:
                shutdown = True
        return shutdown

    def _act(self, action: Action, by: events.DecidedBy = events.DecidedBy.PERSON) -> Reply:
        """`by`: who a decision (or a drop at the decision point) is from, by the name its
        client said at hello."""
        session = self.session
        kind = action.kind
        try:
            if kind is ActionKind.CHECKPOINT:
                result = session.checkpoint(action.run)
            elif kind is ActionKind.STOP:
                result = session.stop(action.run, action.reason)
            elif kind is ActionKind.DROP:
                result = session.drop_many(action.variants, action.at_decision, by=by)
            elif kind is ActionKind.DECIDE:
                result = session.decide(action.decision, by=by)
            elif kind is ActionKind.PAUSE:
                result = session.pause(bool(action.paused))
            elif kind is ActionKind.WRAPUP:
                result = self.wrapups.start()
            else:
                live = bool(self._last_snap and self._last_snap.state.running)
                result = session.shutdown_refusal() or ActionResult(
                    True, ("the engine stops; the runs go on in their own sessions, and "
                           "`itera-tui` starts the engine again") if live else
                    "the engine stops (no run is live); `itera-tui` starts it again")
        except Exception as exc:  # an action must end with words, never a dead engine
            return Reply(action.id, False, f"{kind.value} failed: {type(exc).__name__}: {exc}")
        return Reply(action.id, result.ok, result.message)

    # -- the loop ----------------------------------------------------------------------
    def request_stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def signalled(self, signum: int) -> None:
        """A signal handler's whole work: flags, and takes no lock. `Event.set` takes the
        event's lock, and a handler runs in the main thread between two bytecodes, maybe
        while that thread holds the same lock inside the loop's `wait`: the engine hung
        there, its SIGTERM never recorded. The loop sees the flag at its next pass (a
        poll interval; at most IDLE_POLL_S when nothing moves)."""
        if signum == signal.SIGTERM:  # the system takes the box (see box_going_down)
            if self._box_down is None:
                self._box_down = "SIGTERM"
        else:
            self._stop_signalled = True

    def box_going_down(self, signal_name: str = "SIGTERM", notice: str | None = None,
                       then: Callable[[], str] | None = None) -> None:
        """From a signal handler or the preemption watch (`preemption.py`): the box is
        being taken away. Only flags it; the loop records it, asks every live run for a
        checkpoint and goes once they have settled or the grace is spent
        (`engine/checkpoints/box_down.py`), and only then calls `then` (which says in
        words what it did)."""
        if self._box_down is None:
            self._box_notice = notice
            self._box_then = then
        self._box_down = self._box_down or signal_name
        self._wake.set()

    def _superseded_check(self) -> None:
        """Another box took the campaign at the store (`tui.store.lease`): this engine
        stops its runs after a checkpoint, by the box-going-down path, and says so."""
        why = self.session.superseded() if hasattr(self.session, "superseded") else None
        if why is None or self._box_down is not None:
            return
        self.session.engine.warn(f"{why}: this engine stops its runs after a checkpoint "
                                 "and writes nothing more to the store")
        self.box_going_down(SUPERSEDED_SIGNAL, why)

    def _box_down_step(self) -> bool:
        """One pass of the box-down grace; True once it is over (and said)."""
        engine = self.session.engine
        superseded = self._box_down == SUPERSEDED_SIGNAL
        if superseded and not engine.box_down.begun:
            engine.box_going_down(self._box_down, self._box_notice)
            self._say(f"{self._box_notice}: every live run is asked for a checkpoint, "
                      "then stopped; nothing more is written to the store")
        if not engine.box_down.begun:
            engine.box_going_down(self._box_down, self._box_notice)
            self._say(f"the box is going down ({self._box_notice or self._box_down}): "
                      "every live run is asked "
                      f"for a checkpoint; the engine waits up to "
                      f"{self.session.plan.shutdown_grace_seconds:g} s")
        if not engine.box_down_settled():
            return False
        saved = engine.box_down_finish()
        flush = getattr(self.session, "flush_store", None)
        if flush is not None:  # the store keeps what the next box resumes from
            flush(max(1.0, self.session.plan.shutdown_grace_seconds / 4))
        if self._box_then is not None:  # the provider may take the box now, not later
            try:
                self._say(self._box_then())
            except Exception as exc:  # noqa: BLE001 - the box goes either way
                self._say(f"the provider could not be told ({type(exc).__name__}); it "
                          "takes the box at its own time")
        if superseded:
            self._say(f"{self._box_notice}: {len(saved)} run(s) stopped after a verified "
                      "checkpoint; this engine ends, that box drives the campaign")
            return True
        from ..engine.moves import how_to_continue

        self._say(f"box going down: {len(saved)} run(s) left a verified checkpoint; "
                  f"continue with {how_to_continue(self.session.plan)}")
        return True

    def serve(self) -> ServeEnd:
        """Drive the campaign until it ends (per the policies), or is told to stop."""
        session = self.session
        snap = self._last_snap = session.step(tick=False, sample=False)
        while not (self._stop.is_set() or self._stop_signalled):
            self._superseded_check()  # before any tick: a superseded engine launches nothing
            if self._box_down is not None:  # the system takes the box: checkpoints, then go
                snap = self._last_snap = session.step()
                self._publish(snap)
                if self._box_down_step():
                    self._publish(session.step(tick=False, sample=False), force=True)
                    return ServeEnd.SUPERSEDED if self._box_down == SUPERSEDED_SIGNAL \
                        else ServeEnd.BOX_DOWN
                self._wake.wait(self.poll_interval)
                self._wake.clear()
                continue
            snap = session.step()  # the rules first; LedgerUnwritable: the caller says so
            self._last_snap = snap
            if snap.tick_error and snap.tick_error != self._said_error \
                    and self.on_error is not None:
                self.on_error(snap.tick_error)
            self._said_error = snap.tick_error
            if self._run_requests():  # then a bounded share of what the clients asked
                return ServeEnd.SHUTDOWN
            if snap.phase == "decision" and self.held_warning is not None:
                if self.exit_at_decision and self.client_count() == 0:
                    return ServeEnd.HELD  # headless, nobody to ask: it ends, and says why
                session.engine.decision.release_held()  # a person or the deadline decides
            if self.wrapups.wanted(snap):
                self.wrapups.start()
                snap = session.step(tick=False, sample=False)
            self._publish(snap)
            end = self._ended(snap)
            if end is not None:
                self._publish(session.step(tick=False, sample=False), force=True)
                return end
            if self.requests_waiting():
                continue  # more asked than one pass takes: the next pass ticks first again
            self._wake.wait(IDLE_POLL_S if snap.idle else self.poll_interval)
            self._wake.clear()
        return ServeEnd.SHUTDOWN

    def _ended(self, snap) -> ServeEnd | None:
        if self.exit_at_decision and snap.phase == "decision" and self.client_count() == 0 \
                and self.session.engine.decision.waits_for_a_person():
            return ServeEnd.AWAITING_DECISION  # nobody can answer, and no deadline will
        wrapping = snap.wrapup.running or self.wrapups.wanted(snap)
        if snap.engine.finished and not wrapping:
            if self.wrapup is not WrapupPolicy.ONCE:
                return ServeEnd.FINISHED
            if self.idle_exit_s is not None and self.client_count() == 0 \
                    and self.monotonic() - self.hub.last_client_t >= self.idle_exit_s:
                return ServeEnd.IDLE
        return None
