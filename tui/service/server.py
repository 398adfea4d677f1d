"""The engine as a service: one loop that drives the campaign, one socket for its clients.

Modelled on tmux's server: the process that owns the campaign (the engine
lock, the ledger, the runs) keeps driving it whatever its clients do. A
client (the room, a CLI action, `status`, a bridge from another box) says
`hello`, subscribes to the event stream from the last ledger seq it saw (so a
reconnect misses nothing) and to snapshots, and sends actions, answered with
the same `ActionResult` a face in this process would get.

Threads: the caller's thread runs `serve()`: it steps the session, runs the
actions in arrival order and publishes snapshots; one I/O thread owns the
sockets (non-blocking, `selectors`), so a slow or stuck client never holds
the loop. Each client's output is bounded: snapshots are skipped for a
client that has not drained the last one, and a client that falls
`MAX_BACKLOG` behind on events is dropped (it reconnects from its seq).
"""

from __future__ import annotations

import enum
import json
import os
import queue
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..session.snapshot import ActionResult
from .codec import to_wire
from .histories import enveloped, without_histories
from .protocol import (PROTOCOL_VERSION, Action, ActionKind, Hello, Ping, ProtocolError,
                       Reply, Subscribe, encode, parse_request, MAX_REQUEST_BYTES)

MAX_BACKLOG = 32 * 1024 * 1024  # bytes of events a client may fall behind before it is dropped
SNAPSHOT_BACKLOG = 1024 * 1024  # a client still holding this much gets no new snapshot
SNAPSHOT_EVERY_S = 2.0  # while something moves (the room moves its own clocks in between)
CLOCK_EVERY_S = 5.0  # clocks and ages, when nothing else moved
IDLE_POLL_S = 5.0  # nothing can change by itself: step this often (a client wakes it)
HISTORY_EVERY_S = 10.0  # the charts' points (the bulk of a snapshot) cross this often;
# snapshots in between leave them out and the client keeps its last (service/histories.py)


class ServeEnd(str, enum.Enum):
    """Why `serve()` returned."""
    FINISHED = "finished"  # the campaign ended (and was wrapped up, per the policy)
    AWAITING_DECISION = "awaiting_decision"  # headless: a decision nobody can answer
    SHUTDOWN = "shutdown"  # asked to stop (an action, a signal)
    IDLE = "idle"  # done, and no client for the idle timeout
    HELD = "held"  # headless: "continue" held back, the control's pilot failed
    BOX_DOWN = "box_down"  # the system announced the box's end: runs checkpointed, gone


class WrapupPolicy(str, enum.Enum):
    ONCE = "once"  # the detached engine: wrap up a finished campaign unless already done
    ALWAYS = "always"  # `run --headless`: rebuild and verify at every end, as it always did
    NEVER = "never"  # `run --headless --no-wrapup`


@dataclass
class _Client:
    sock: socket.socket
    name: str = "?"
    rbuf: bytearray = field(default_factory=bytearray)
    wbuf: bytearray = field(default_factory=bytearray)
    greeted: bool = False
    subscribed: bool = False
    snapshots: bool = False
    last_seq: int = -1
    closing: bool = False


def first_frame(snap) -> bytes:
    """A new face's first frame, at once and light: the last step's runs and state, none
    of the charts' points, the conclusion or the ending (the next snapshot, a moment
    later, brings them whole), so a room paints before it has loaded what those need."""
    from dataclasses import replace

    light = replace(without_histories(snap), conclusion=None, ending=None)
    return encode({"op": "snapshot", "histories": False, "snapshot": to_wire(light)})


def _peer_uid(sock: socket.socket) -> int | None:
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[1]
    except (OSError, AttributeError):
        return None


class EngineService:
    def __init__(self, session, socket_file: Path, *, poll_interval: float = 0.25,
                 wrapup: WrapupPolicy = WrapupPolicy.ONCE, exit_at_decision: bool = False,
                 idle_exit_s: float | None = None, on_line: Callable[[str], None] | None = None,
                 on_error: Callable[[str], None] | None = None, hold_continue: bool = True,
                 clock: Callable[[], float] = time.monotonic):
        self.session = session
        self.socket_file = Path(socket_file)
        self.poll_interval = poll_interval
        self.wrapup = wrapup
        self.exit_at_decision = exit_at_decision
        self.idle_exit_s = idle_exit_s
        self.on_line = on_line
        self.on_error = on_error or on_line  # every tick error shown, once while it lasts
        self._said_error: str | None = None
        # an automatic "continue" (--decide or the plan's) is applied only once the pilots
        # are seen: when the control's pilot failed, the full runs would fail the same way
        self._held: str | None = None
        if hold_continue and session.engine.auto_decision == "continue":
            self._held, session.engine.auto_decision = "continue", None
        self._held_said = False
        self.held_warning: str | None = None
        self.monotonic = clock
        self._clients: dict[int, _Client] = {}
        self._clients_lock = threading.RLock()
        self._requests: queue.Queue = queue.Queue()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._pipe_r, self._pipe_w = os.pipe()
        os.set_blocking(self._pipe_r, False)
        os.set_blocking(self._pipe_w, False)
        self._listener: socket.socket | None = None
        self._io_thread: threading.Thread | None = None
        self._last_publish = float("-inf")
        self._last_history = float("-inf")
        self._state_wire: tuple | None = None
        self._publish_error: str | None = None
        self._last_snap = None  # the last step's snapshot: a new face's first frame at once
        self._last_events = None
        self._last_client_t = self.monotonic()
        self._wrapup_started = False
        self._box_down: str | None = None  # the signal that announced the box's end

    # -- the socket -----------------------------------------------------------------
    def listen(self) -> None:
        """Bind the owner-only socket (the engine lock is already ours: a socket file
        left there is a dead engine's)."""
        self._plan_toml = self._plan_text()  # read here, not on the I/O thread at each hello
        path = self.socket_file
        try:
            path.unlink()
        except FileNotFoundError:
            pass
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(old)
        os.chmod(path, 0o600)
        sock.listen(16)
        sock.setblocking(False)
        self._listener = sock
        self._selector.register(sock, selectors.EVENT_READ, "listen")
        self._selector.register(self._pipe_r, selectors.EVENT_READ, "wake")
        self.session.subscribe(self._on_event)
        self._io_thread = threading.Thread(target=self._io_loop, name="itera-io", daemon=True)
        self._io_thread.start()

    def say_bye(self, reason: str) -> None:
        """Tell every client why the engine goes (before `close`), so a room says it."""
        with self._clients_lock:
            for client in self._clients.values():
                if client.greeted:
                    self._send(client, {"op": "bye", "reason": reason})
        deadline = self.monotonic() + 2.0
        while self.monotonic() < deadline:  # let the I/O thread flush the last words
            with self._clients_lock:
                if not any(c.wbuf for c in self._clients.values()):
                    return
            time.sleep(0.02)

    def close(self) -> None:
        self._stop.set()
        self._poke_io()
        if self._io_thread is not None and self._io_thread is not threading.current_thread():
            self._io_thread.join(5)
        with self._clients_lock:
            for client in list(self._clients.values()):
                try:
                    client.sock.close()
                except OSError:
                    pass
            self._clients.clear()
        if self._listener is not None:
            self._listener.close()
            try:
                self.socket_file.unlink()
            except OSError:
                pass
        for fd in (self._pipe_r, self._pipe_w):
            try:
                os.close(fd)
            except OSError:
                pass

    def client_count(self) -> int:
        with self._clients_lock:
            return sum(1 for c in self._clients.values() if c.greeted)

    def _poke_io(self) -> None:
        try:
            os.write(self._pipe_w, b"x")
        except (BlockingIOError, OSError):
            pass

    def _io_loop(self) -> None:
        while not self._stop.is_set():
            with self._clients_lock:
                for client in self._clients.values():
                    want = selectors.EVENT_READ | (selectors.EVENT_WRITE if client.wbuf else 0)
                    try:
                        self._selector.modify(client.sock, want, client)
                    except (KeyError, ValueError, OSError):
                        pass
            try:
                ready = self._selector.select(timeout=1.0)
            except OSError:
                continue
            for key, mask in ready:
                if key.data == "listen":
                    self._accept()
                elif key.data == "wake":
                    try:
                        while os.read(self._pipe_r, 4096):
                            pass
                    except (BlockingIOError, OSError):
                        pass
                else:
                    if mask & selectors.EVENT_READ:
                        self._read(key.data)
                    if mask & selectors.EVENT_WRITE:
                        self._flush(key.data)
            self._reap()

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, OSError):
            return
        uid = _peer_uid(sock)
        if uid is not None and uid != os.getuid():  # the 0600 mode already says so
            sock.close()
            return
        sock.setblocking(False)
        client = _Client(sock)
        with self._clients_lock:
            self._clients[sock.fileno()] = client
            self._selector.register(sock, selectors.EVENT_READ, client)
        self._last_client_t = self.monotonic()

    def _read(self, client: _Client) -> None:
        try:
            data = client.sock.recv(65536)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:
            client.closing = True
            return
        client.rbuf += data
        while True:
            nl = client.rbuf.find(b"\n")
            if nl < 0:
                if len(client.rbuf) > MAX_REQUEST_BYTES:
                    self._send(client, {"op": "error", "message":
                                        f"message longer than {MAX_REQUEST_BYTES} bytes"})
                    client.rbuf.clear()
                return
            line = bytes(client.rbuf[:nl])
            del client.rbuf[:nl + 1]
            if line.strip():
                self._request(client, line)

    def _request(self, client: _Client, line: bytes) -> None:
        try:
            request = parse_request(line)
        except ProtocolError as exc:
            rid = None
            try:
                obj = json.loads(line)
                rid = obj.get("id") if isinstance(obj, dict) and isinstance(
                    obj.get("id"), int) else None
            except ValueError:
                pass
            self._send(client, {"op": "error", "id": rid, "message": str(exc)})
            return
        if isinstance(request, Hello):
            if request.protocol != PROTOCOL_VERSION:
                self._send(client, {"op": "error", "message":
                                    f"protocol {request.protocol} not spoken here: this "
                                    f"engine speaks protocol {PROTOCOL_VERSION} (use the same "
                                    "itera-tui version on both sides)"})
                client.closing = True
                return
            client.name, client.greeted = request.client, True
            self._send(client, self._hello())
            return
        if not client.greeted:
            self._send(client, {"op": "error", "message": "say hello first"})
            return
        if isinstance(request, Ping):
            self._send(client, {"op": "result", "id": request.id, "ok": True,
                                "message": "pong"})
            return
        self._requests.put((client, request))  # subscribe and actions: on the loop's thread
        self._wake.set()

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
                "folder": plan.root.name, "events": self.session.engine.state.events}

    def _send(self, client: _Client, message: dict | bytes) -> None:
        data = message if isinstance(message, bytes) else encode(message)
        with self._clients_lock:
            if len(client.wbuf) + len(data) > MAX_BACKLOG:
                client.closing = True  # it reconnects from the last seq it got
                return
            client.wbuf += data
        self._poke_io()

    def _flush(self, client: _Client) -> None:
        with self._clients_lock:
            if not client.wbuf:
                return
            try:
                sent = client.sock.send(client.wbuf[:1 << 20])
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                client.closing = True
                return
            del client.wbuf[:sent]

    def _reap(self) -> None:
        with self._clients_lock:
            for fd, client in list(self._clients.items()):
                if client.closing:
                    if client.wbuf:
                        self._flush(client)  # the last words (an error, a bye), best effort
                    self._drop(fd, client)

    def _drop(self, fd: int, client: _Client) -> None:
        try:
            self._selector.unregister(client.sock)
        except (KeyError, ValueError, OSError):
            pass
        try:
            client.sock.close()
        except OSError:
            pass
        self._clients.pop(fd, None)
        self._last_client_t = self.monotonic()

    # -- events and snapshots out -------------------------------------------------------
    def _on_event(self, ev: dict) -> None:
        """A new ledger event (from whichever thread recorded it), to every subscriber."""
        seq = ev.get("seq")
        data = None
        with self._clients_lock:
            for client in self._clients.values():
                if not client.subscribed or (isinstance(seq, int) and seq <= client.last_seq):
                    continue
                if data is None:
                    data = encode({"op": "event", "event": to_wire(ev)})
                if isinstance(seq, int):
                    client.last_seq = seq
                self._send(client, data)
        self._wake.set()

    def _subscribe(self, client: _Client, request: Subscribe) -> None:
        journal = self.session.engine.journal
        with self._clients_lock:
            if request.from_seq is None:
                past = journal.recent(request.history) if request.history else []
            else:
                past = self._events_after(request.from_seq)
            for ev in past:
                self._send(client, {"op": "event", "event": to_wire(ev)})
            last = past[-1].get("seq") if past else None
            if not isinstance(last, int):
                recent = journal.recent(1)
                last = recent[-1].get("seq") if recent else -1
            client.last_seq = last if isinstance(last, int) else -1
            if request.from_seq is not None:
                client.last_seq = max(client.last_seq, request.from_seq)
            client.subscribed, client.snapshots = True, request.snapshots
            if request.snapshots and self._last_snap is not None:
                self._send(client, first_frame(self._last_snap))
        self._last_publish = self._last_history = float("-inf")  # a new face: at once, whole

    def _events_after(self, seq: int) -> list[dict]:
        journal = self.session.engine.journal
        recent = journal.recent(10 ** 9)
        if recent and isinstance(recent[0].get("seq"), int) and recent[0]["seq"] <= seq + 1:
            return [ev for ev in recent if isinstance(ev.get("seq"), int) and ev["seq"] > seq]
        from ..engine.ledger.file import read_ledger  # further back than memory: the file

        return [ev for ev in read_ledger(journal.path)
                if isinstance(ev.get("seq"), int) and ev["seq"] > seq]

    def _say(self, text: str) -> None:
        if self.on_line is not None:
            self.on_line(text)

    def _publish(self, snap, force: bool = False) -> None:
        """Send the snapshot to the clients that want one (never fatal to the engine)."""
        try:
            self._publish_now(snap, force)
        except Exception as exc:
            text = f"a snapshot could not be sent: {type(exc).__name__}: {exc}"
            if text != self._publish_error:
                self._publish_error = text
                self._say(text)

    def _publish_now(self, snap, force: bool = False) -> None:
        now = self.monotonic()
        moved = snap.state.events != self._last_events
        every = IDLE_POLL_S * 3 if snap.idle else (SNAPSHOT_EVERY_S if snap.state.running
                                                    or snap.wrapup.running else CLOCK_EVERY_S)
        if not (force or moved or now - self._last_publish >= every):
            return
        with self._clients_lock:
            takers = [c for c in self._clients.values()
                      if c.subscribed and c.snapshots and len(c.wbuf) < SNAPSHOT_BACKLOG]
        if not takers:
            return
        histories = force or now - self._last_history >= HISTORY_EVERY_S
        if histories:
            self._last_history = now
            snap = enveloped(snap)
        else:
            snap = without_histories(snap)
        state = snap.engine.state  # the same object until the next event: encoded once
        if self._state_wire is None or self._state_wire[0] is not state:
            self._state_wire = (state, to_wire(state))
        data = encode({"op": "snapshot", "histories": histories,
                       "snapshot": to_wire(snap, known={id(state): self._state_wire[1]})})
        self._last_publish, self._last_events = now, snap.state.events
        for client in takers:
            self._send(client, data)

    # -- actions in ----------------------------------------------------------------------
    def _run_requests(self) -> bool:
        """Subscriptions and actions, in arrival order; True when one asked to shut down."""
        shutdown = False
        while True:
            try:
                client, request = self._requests.get_nowait()
            except queue.Empty:
                return shutdown
            if isinstance(request, Subscribe):
                try:
                    self._subscribe(client, request)
                except Exception as exc:  # one client's bad luck never takes the engine
                    self._say(f"a client's subscription failed: {type(exc).__name__}: {exc}")
                    self._send(client, {"op": "error", "message": "subscription failed: "
                                        f"{type(exc).__name__}"})
                    client.closing = True
                continue
            reply = self._act(request)
            self._send(client, {"op": "result", "id": reply.id, "ok": reply.ok,
                                "message": reply.message})
            if request.kind is ActionKind.SHUTDOWN and reply.ok:
                shutdown = True

    def _act(self, action: Action) -> Reply:
        session = self.session
        kind = action.kind
        try:
            if kind is ActionKind.CHECKPOINT:
                result = session.checkpoint(action.run)
            elif kind is ActionKind.STOP:
                result = session.stop(action.run, action.reason)
            elif kind is ActionKind.DROP:
                result = session.drop_many(action.variants, action.at_decision)
            elif kind is ActionKind.DECIDE:
                result = session.decide(action.decision)
            elif kind is ActionKind.PAUSE:
                result = session.pause(bool(action.paused))
            elif kind is ActionKind.WRAPUP:
                result = self._start_wrapup()
            else:
                result = session.shutdown_refusal() or ActionResult(
                    True, "the engine stops; the runs go on in their own sessions, and "
                    "`itera-tui` starts the engine again")
        except Exception as exc:  # an action must end with words, never a dead engine
            return Reply(action.id, False, f"{kind.value} failed: {type(exc).__name__}: {exc}")
        return Reply(action.id, result.ok, result.message)

    # -- the wrap-up -------------------------------------------------------------------
    def _start_wrapup(self):
        self._wrapup_started = True
        return self.session.start_wrapup(self.on_line)

    def _wants_wrapup(self, snap) -> bool:
        if self.wrapup is WrapupPolicy.NEVER or self._wrapup_started or snap.wrapup.running:
            return False
        if not snap.engine.finished:  # with [store]: early enough to deliver in time
            return self.session.wrapup_due_for_delivery(snap)
        if self.wrapup is WrapupPolicy.ALWAYS:
            return True
        wrap = snap.state.wrapup
        return wrap is None or wrap.state == "started"  # never built, or cut short

    # -- the loop ----------------------------------------------------------------------
    def request_stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def box_going_down(self, signal_name: str = "SIGTERM") -> None:
        """From a signal handler: the system is taking the box away. Only flags it; the
        loop records it, asks every live run for a checkpoint and goes once they have
        settled or the grace is spent (`engine/checkpoints/box_down.py`)."""
        self._box_down = self._box_down or signal_name
        self._wake.set()

    def _box_down_step(self) -> bool:
        """One pass of the box-down grace; True once it is over (and said)."""
        engine = self.session.engine
        if not engine.box_down.begun:
            engine.box_going_down(self._box_down)
            self._say(f"the box is going down ({self._box_down}): every live run is asked "
                      f"for a checkpoint; the engine waits up to "
                      f"{self.session.plan.shutdown_grace_seconds:g} s")
        if not engine.box_down_settled():
            return False
        saved = engine.box_down_finish()
        flush = getattr(self.session, "flush_store", None)
        if flush is not None:  # the store keeps what the next box resumes from
            flush(max(1.0, self.session.plan.shutdown_grace_seconds / 4))
        self._say(f"box going down: {len(saved)} run(s) left a verified checkpoint; "
                  "`itera-tui resume` continues the campaign")
        return True

    def serve(self) -> ServeEnd:
        """Drive the campaign until it ends (per the policies), or is told to stop."""
        session = self.session
        snap = self._last_snap = session.step(tick=False, sample=False)
        while not self._stop.is_set():
            if self._box_down is not None:
                snap = self._last_snap = session.step()
                self._publish(snap)
                if self._box_down_step():
                    self._publish(session.step(tick=False, sample=False), force=True)
                    return ServeEnd.BOX_DOWN
                self._wake.wait(self.poll_interval)
                self._wake.clear()
                continue
            if self._run_requests():
                return ServeEnd.SHUTDOWN
            snap = session.step()  # LedgerUnwritable: the engine stopped; the caller says so
            self._last_snap = snap
            if snap.tick_error and snap.tick_error != self._said_error \
                    and self.on_error is not None:
                self.on_error(snap.tick_error)
            self._said_error = snap.tick_error
            if snap.phase == "decision" and self._held:
                held = self._check_held(snap)
                if held is not None:
                    return held
                continue
            if self._wants_wrapup(snap):
                self._start_wrapup()
                snap = session.step(tick=False, sample=False)
            self._publish(snap)
            end = self._ended(snap)
            if end is not None:
                self._publish(session.step(tick=False, sample=False), force=True)
                return end
            self._wake.wait(IDLE_POLL_S if snap.idle else self.poll_interval)
            self._wake.clear()
        return ServeEnd.SHUTDOWN

    def _check_held(self, snap) -> ServeEnd | None:
        """A held "continue" at the decision point: applied, or (the control's pilot
        failed) not: headless ends (HELD), the detached engine says so once and waits
        for a person (or the decision deadline)."""
        from ..engine.decision.pilots import continue_warning

        pending = snap.state.decision_pending
        warning = continue_warning(self.session.plan, pending.pilot) \
            if pending is not None else None
        if warning is None:
            if pending is None:
                return None  # the pending event is recorded on the next tick
            self.session.engine.auto_decision, self._held = self._held, None
            self._wake.set()
            return None
        self.held_warning = warning
        if self.exit_at_decision and self.client_count() == 0:
            return ServeEnd.HELD
        if not self._held_said:
            self._held_said = True
            self.session.engine.journal.record(
                "warning", message=f"not continuing by itself: {warning}; answer the "
                "decision in the room or with `itera-tui decide`")
        self._held = None  # a person (or the deadline) decides from here
        return None

    def _ended(self, snap) -> ServeEnd | None:
        pending = snap.state.decision_pending
        deadline = pending is not None and getattr(pending, "deadline", None)
        if self.exit_at_decision and snap.phase == "decision" and not deadline \
                and not self.session.engine.auto_decision and self.client_count() == 0:
            return ServeEnd.AWAITING_DECISION  # nobody can answer, and no deadline will
        wrapping = snap.wrapup.running or self._wants_wrapup(snap)
        if snap.engine.finished and not wrapping:
            if self.wrapup is not WrapupPolicy.ONCE:
                return ServeEnd.FINISHED
            if self.idle_exit_s is not None and self.client_count() == 0 \
                    and self.monotonic() - self._last_client_t >= self.idle_exit_s:
                return ServeEnd.IDLE
        return None
