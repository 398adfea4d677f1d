"""The engine process's client: a `SessionSource` over a socket or an ssh pipe.

The room is built against `SessionSource`; this is the implementation that
talks to the engine process instead of holding an engine. It keeps the last
snapshot the engine sent and the events it streamed; `step()` returns the
snapshot at once (the engine steps itself), actions are sent and answered
with the engine's own `ActionResult`. When the link drops (the engine died,
sshd went away) the snapshot says so (`LinkStatus`: "link lost since
HH:MM"), the client reconnects with backoff and asks for every event after
the last seq it saw, so nothing is missed and nothing is shown twice; the
engine never notices a client come or go.

Transports: `unix_transport` (the socket on this box) and `pipe_transport`
(a command whose stdin/stdout carry the protocol: `ssh HOST itera-tui attach
--stdio DIR`, as Docker's ssh transport runs `docker system dial-stdio`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections import deque
from dataclasses import replace
from pathlib import Path
from typing import Callable, Protocol

from ..campaign.text import for_terminal
from ..engine.decision.answer import Decision
from ..engine.ledger import events
from ..session.snapshot import ActionResult
from ..session.snapshot import LinkState, LinkStatus, WrapupProgress
from .codec import WireError, from_wire
from .protocol import PROTOCOL_VERSION, ActionKind, action_message, encode
from .histories import with_histories_of
from .hub import BUSY

HISTORY_KEPT = 1000
STDERR_LINES_KEPT = 8  # of a pipe transport's command (ssh): the last words it said
CONNECT_TIMEOUT_S = 5.0  # a connect the engine's listen queue cannot take: busy, not a hang
BUSY_RETRY_S = 3.0  # a busy engine (connection cap, full queue) is asked again this long
BUSY_BACKOFF_S = (0.1, 0.2, 0.4, 0.8)
ACTION_TIMEOUT_S = 20.0
FIRST_SNAPSHOT_TIMEOUT_S = 30.0
MAX_LINE = 256 * 1024 * 1024  # a snapshot of a large campaign; a line past this is an error


class EngineUnavailable(Exception):
    """No engine answers (not started, stopped, or the link is down), in words."""


class EngineBusy(EngineUnavailable):
    """An engine runs but takes no more connections now (its cap per user, or its listen
    queue is full): retried briefly, then said as "busy", never as "no engine"."""


class Transport(Protocol):
    def send(self, data: bytes) -> None: ...

    def recv(self) -> bytes: ...  # b"" at the end

    def close(self) -> None: ...


class _SocketTransport:
    def __init__(self, sock: socket.socket):
        self.sock = sock

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self) -> bytes:
        return self.sock.recv(1 << 20)

    def close(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


class _PipeTransport:
    """The protocol over a command's stdin/stdout. Its stderr (ssh's own words: "Connection
    refused", "Permission denied (publickey)") is drained by a thread into a bounded
    tail, so a link that ends during the hello is said in the command's words."""

    def __init__(self, popen: subprocess.Popen):
        self.popen = popen
        self._err: deque[bytes] = deque(maxlen=STDERR_LINES_KEPT)
        self._drain = None
        if popen.stderr is not None:
            self._drain = threading.Thread(target=self._read_stderr, daemon=True,
                                           name="itera-pipe-stderr")
            self._drain.start()

    def _read_stderr(self) -> None:
        try:
            for line in iter(lambda: self.popen.stderr.readline(4096), b""):
                if line.strip():
                    self._err.append(line.strip())
        except (OSError, ValueError):
            pass

    def ended_why(self, wait_s: float = 5.0) -> str | None:
        """The command's exit status and its last stderr lines, once it ended (None if it
        is still running or said nothing)."""
        try:
            code = self.popen.wait(wait_s)
        except subprocess.TimeoutExpired:
            return None
        if self._drain is not None:
            self._drain.join(wait_s)
        said = "; ".join(for_terminal(b.decode("utf-8", "replace")) for b in self._err)
        if not said:
            return None
        name = os.path.basename(str(self.popen.args[0])) if self.popen.args else "the link"
        return f"{name} ended with status {code} during the hello: {said[:600]}"

    def send(self, data: bytes) -> None:
        self.popen.stdin.write(data)
        self.popen.stdin.flush()

    def recv(self) -> bytes:
        return self.popen.stdout.read1(1 << 20)

    def close(self) -> None:
        for stream in (self.popen.stdin, self.popen.stdout, self.popen.stderr):
            if stream is None:
                continue
            try:
                stream.close()
            except OSError:
                pass
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(5)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)


def unix_transport(path: Path) -> Callable[[], Transport]:
    def connect() -> Transport:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(CONNECT_TIMEOUT_S)
        try:
            sock.connect(str(path))
        except (BlockingIOError, TimeoutError) as exc:  # EAGAIN: its listen queue is full
            sock.close()
            raise EngineBusy("the engine is busy: its queue of new connections is full "
                             f"({exc.strerror or 'timed out'})") from None
        except OSError as exc:
            sock.close()
            raise EngineUnavailable(_why_not(exc)) from None
        sock.settimeout(None)
        return _SocketTransport(sock)
    return connect


def _why_not(exc: OSError) -> str:
    if isinstance(exc, (FileNotFoundError, ConnectionRefusedError)):
        return "no engine is running for this campaign"
    if isinstance(exc, PermissionError):
        return "the engine's socket belongs to another user"
    return f"the engine's socket cannot be reached: {exc.strerror or exc}"


def pipe_transport(argv: list[str], stderr_to: Path | None = None) -> Callable[[], Transport]:
    """A command whose stdin/stdout are the protocol (the ssh bridge); never a shell."""
    def connect() -> Transport:
        err = open(stderr_to, "ab") if stderr_to is not None else subprocess.PIPE
        try:
            popen = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=err, start_new_session=True)
        except OSError as exc:
            raise EngineUnavailable(f"{argv[0]}: {exc.strerror or exc}") from None
        finally:
            if stderr_to is not None:
                err.close()
        return _PipeTransport(popen)
    return connect


class _Pending:
    def __init__(self):
        self.done = threading.Event()
        self.reply: dict | None = None


class EngineClient:
    """A `SessionSource` whose engine is another process (on this box or another)."""

    def __init__(self, connect: Callable[[], Transport], *, name: str = "room",
                 clock: Callable[[], float] = time.time, reconnect: bool = True,
                 backoff: tuple[float, ...] = (0.2, 0.5, 1.0, 2.0, 3.0),
                 where: str = "this box", snapshots: bool = True):
        self._connect = connect
        self.name = name
        self.clock = clock
        self.reconnect = reconnect
        self.backoff = backoff
        self.where = where
        self.want_snapshots = snapshots
        self.plan = None
        self.hello: dict | None = None
        self._transport: Transport | None = None
        self._lock = threading.RLock()
        self._listeners: list[Callable[[events.Event], None]] = []
        self._history: deque[dict] = deque(maxlen=HISTORY_KEPT)
        self._last_seq: int | None = None
        self._snapshot = None
        self._snapshot_callbacks: list[Callable[[], None]] = []
        self._first = threading.Event()
        self._pending: dict[int, _Pending] = {}
        self._next_id = 1
        self._closed = threading.Event()
        self._link = LinkStatus(LinkState.CONNECTING, clock(), where=where)
        self._wrapup_line = None
        self._wrapup_lines_seen = 0
        self._wrapup_job_t: float | None = None
        self._reader: threading.Thread | None = None
        self.engine_pid: int | None = None
        self.bye: str | None = None  # why the engine said it goes, if it did
        self._said_why = False
        self.decode_error: str | None = None
        self.restart_engine: Callable[[], None] | None = None  # set for an engine on this box

    # -- connecting ---------------------------------------------------------------------
    def open(self, plan_from_hello: Callable[[dict], object] | None = None,
             history: int = 300) -> "EngineClient":
        """Connect and greet (EngineUnavailable, in words, when no engine answers); then
        a thread follows the engine, reconnecting when the link drops. A busy engine is
        asked again for `BUSY_RETRY_S` before EngineBusy says so."""
        transport, hello, buf = self._greet_retrying_busy(history)
        self.hello = hello
        if plan_from_hello is not None:
            self.plan = plan_from_hello(hello)
        self._attach(transport, hello)
        self._reader = threading.Thread(target=self._follow, args=(transport, buf),
                                        name="itera-client", daemon=True)
        self._reader.start()
        return self

    def open_later(self, plan) -> "EngineClient":
        """Follow an engine that may not answer yet (another box, still starting or out
        of reach): the link reads lost until it answers, and `peek()` is None till then."""
        self.plan = plan
        with self._lock:
            self._link = LinkStatus(LinkState.LOST, self.clock(), "not reached yet",
                                    where=self.where)

        def follow():
            got = self._reconnect()
            if got is not None:
                self._follow(*got)

        self._reader = threading.Thread(target=follow, name="itera-client", daemon=True)
        self._reader.start()
        return self

    def peek(self):
        """The last snapshot, at once (None before the first one)."""
        with self._lock:
            return None if self._snapshot is None else replace(self._snapshot,
                                                                  link=self._link)

    def _greet_retrying_busy(self, history: int):
        deadline = time.monotonic() + BUSY_RETRY_S
        for attempt in range(10 ** 6):
            try:
                return self._greet(history, None)
            except EngineBusy:
                delay = BUSY_BACKOFF_S[min(attempt, len(BUSY_BACKOFF_S) - 1)]
                if time.monotonic() + delay > deadline:
                    raise
                time.sleep(delay)

    def _greet(self, history: int, from_seq: int | None):
        transport = self._connect()
        try:
            try:
                transport.send(encode({"op": "hello", "protocol": PROTOCOL_VERSION,
                                       "client": self.name}))
            except OSError:
                pass  # an engine that refused us at once ("busy") left its reason to read
            buf = bytearray()
            line = self._read_line(transport, buf)
            if line is None:  # a link that ended says why in its own words (ssh's error)
                why = getattr(transport, "ended_why", lambda: None)()
                raise EngineUnavailable(why or "the engine closed the connection during "
                                        "the hello")
            hello = json.loads(line)
            if hello.get("op") == "error":
                message = str(hello.get("message"))[:500]
                if message.startswith(BUSY + ":"):
                    raise EngineBusy(f"the engine is {message}")
                raise EngineUnavailable(message)
            if hello.get("op") != "hello":
                raise EngineUnavailable("the other side does not speak the engine's protocol")
            transport.send(encode({"op": "subscribe", "from_seq": from_seq,
                                   "snapshots": self.want_snapshots, "history": history}))
            return transport, hello, buf
        except ConnectionResetError:  # an engine that answers cannot take us now: with
            transport.close()  # thousands of connections at once its socket is reset
            raise EngineBusy("the engine is busy: it reset the connection during the hello "
                             "(too many connections at once)") from None
        except (OSError, ValueError) as exc:
            why = getattr(transport, "ended_why", lambda: None)() \
                if isinstance(exc, OSError) else None  # ssh gone before the hello was sent
            transport.close()
            raise EngineUnavailable(why or f"the engine's link failed during the hello: "
                                    f"{exc}") from None
        except EngineUnavailable:
            transport.close()
            raise

    def _attach(self, transport: Transport, hello: dict) -> None:
        with self._lock:
            self._transport = transport
            self.engine_pid = hello.get("engine_pid")
            self._link = LinkStatus(LinkState.CONNECTED, self.clock(), where=self.where,
                                    engine_pid=self.engine_pid)

    @staticmethod
    def _read_line(transport: Transport, buf: bytearray) -> bytes | None:
        while True:
            nl = buf.find(b"\n")
            if nl >= 0:
                line = bytes(buf[:nl])
                del buf[:nl + 1]
                return line
            if len(buf) > MAX_LINE:
                raise ValueError("a line longer than the protocol allows")
            data = transport.recv()
            if not data:
                return None
            buf += data

    def _follow(self, transport: Transport, buf: bytearray) -> None:
        while not self._closed.is_set():
            try:
                while True:
                    line = self._read_line(transport, buf)
                    if line is None:
                        break
                    if line.strip():
                        self._dispatch(line)
            except (OSError, ValueError):
                pass
            transport.close()
            if self._closed.is_set() or not self.reconnect:
                self._lost("the engine closed the link")
                return
            self._lost("the engine's link dropped")
            got = self._reconnect()
            if got is None:
                return
            transport, buf = got

    def _lost(self, why: str) -> None:
        with self._lock:
            self._transport = None
            self._said_why = self.bye is not None
            if self.bye:
                why, self.bye = self.bye, None
            if self._link.state is LinkState.CONNECTED or self._link.state is \
                    LinkState.CONNECTING:
                self._link = LinkStatus(LinkState.LOST, self.clock(), why, where=self.where,
                                        engine_pid=self.engine_pid)
            for pending in self._pending.values():
                pending.reply = {"ok": False, "message": "the link to the engine dropped "
                                 "before it answered; the action may or may not have been "
                                 "taken (the events log tells)"}
                pending.done.set()
            self._pending.clear()
        self._pushed()  # the header says LINK LOST now, not at the next clock tick

    def _reconnect(self):
        attempt = 0
        while not self._closed.is_set():
            delay = self.backoff[min(attempt, len(self.backoff) - 1)]
            if self._closed.wait(delay):
                return None
            attempt += 1
            try:
                first = self._last_seq is None and self.hello is None
                transport, hello, buf = self._greet(300 if first else 0, None if first
                                                    else (self._last_seq if self._last_seq
                                                          is not None else -1))
                self.hello = self.hello or hello
            except EngineUnavailable as exc:
                with self._lock:  # the engine's own last words, when it said why, stay
                    detail = self._link.detail if self._said_why else str(exc)
                    self._link = replace(self._link, detail=detail, attempts=attempt)
                self._pushed()
                continue
            self._attach(transport, hello)
            return transport, buf
        return None

    def start_engine(self) -> ActionResult:
        """Start the engine again (this box only), for a room whose engine is gone."""
        if self.restart_engine is None:
            return ActionResult(False, f"the engine runs on {self.where}: start it there "
                                "(`itera-tui engine start`); this room reconnects by itself")
        if not self.link.lost:
            return ActionResult(False, "the engine is running")
        try:
            self.restart_engine()
        except Exception as exc:  # words, never a traceback in the room
            return ActionResult(False, f"the engine did not start: {exc}")
        return ActionResult(True, "engine starting; the room reconnects by itself")

    # -- what the engine says -------------------------------------------------------------
    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        op = message.get("op") if isinstance(message, dict) else None
        if op == "event" and isinstance(message.get("event"), dict):
            try:
                ev = events.parse(message["event"])
            except (ValueError, KeyError, TypeError, RecursionError):
                return
            self._event(ev)
        elif op == "snapshot":
            try:
                snap = from_wire(message.get("snapshot"))
            except (WireError, RecursionError, TypeError, ValueError) as exc:
                self.decode_error = f"{type(exc).__name__}: {exc}"[:300]
                return
            with self._lock:
                if message.get("histories") is False:
                    snap = with_histories_of(snap, self._snapshot)
                self._snapshot = snap
            self._first.set()
            self._follow_wrapup(snap)
            self._pushed()
        elif op == "bye":
            with self._lock:
                self.bye = str(message.get("reason") or "the engine ended")[:300]
        elif op in ("result", "error") and isinstance(message.get("id"), int):
            with self._lock:
                pending = self._pending.pop(message["id"], None)
            if pending is not None:
                pending.reply = message
                pending.done.set()

    def _event(self, ev: events.Event) -> None:
        seq = ev.seq
        with self._lock:
            if self._last_seq is not None and seq <= self._last_seq:
                return  # already shown (a reconnect asked from the last seq)
            self._last_seq = seq
            self._history.append(ev)
            listeners = list(self._listeners)
        for listener in listeners:
            listener(ev)

    def _follow_wrapup(self, snap) -> None:
        lines = snap.wrapup.lines
        on_line = self._wrapup_line
        if snap.wrapup.started_t != self._wrapup_job_t:  # another wrap-up: its lines anew
            self._wrapup_job_t = snap.wrapup.started_t
            self._wrapup_lines_seen = 0
        if on_line is None:
            self._wrapup_lines_seen = len(lines)
            return
        for line in lines[self._wrapup_lines_seen:]:
            on_line(line)
        self._wrapup_lines_seen = len(lines)

    def _pushed(self) -> None:
        """A new snapshot, or a new link state, is there: tell whoever draws it."""
        with self._lock:
            callbacks = list(self._snapshot_callbacks)
        for callback in callbacks:
            callback()

    # -- SessionSource -----------------------------------------------------------------
    def on_snapshot(self, callback: Callable[[], None]) -> bool:
        with self._lock:
            self._snapshot_callbacks.append(callback)
        return True

    @property
    def link(self) -> LinkStatus:
        with self._lock:
            return self._link

    def _latest(self, timeout: float = FIRST_SNAPSHOT_TIMEOUT_S):
        if not self._first.wait(timeout):
            why = f" (the last one could not be read: {self.decode_error})" \
                if self.decode_error else ""
            raise EngineUnavailable(f"the engine sent no snapshot within {timeout:g} s{why}")
        with self._lock:
            return replace(self._snapshot, link=self._link, now=self.clock())

    def step(self, tick: bool = True, sample: bool = True):
        return self._latest()

    def replayed(self):
        return self._latest()

    def history(self, limit: int) -> list[events.Event]:
        with self._lock:
            events = list(self._history)
        return events[len(events) - max(0, min(limit, len(events))):]

    def subscribe(self, listener: Callable[[events.Event], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def _ask(self, message_of: Callable[[int], dict], timeout: float) -> dict | str:
        """Send one request (built from its id) and wait for its answer: the reply, or
        why there is none, in words. The one place a request is numbered and waited on."""
        with self._lock:
            transport = self._transport
            if transport is None:
                since = time.strftime("%H:%M", time.localtime(self._link.since_t))
                return f"the engine is not reachable (link lost since {since}); nothing was sent"
            rid = self._next_id
            self._next_id += 1
            pending = self._pending[rid] = _Pending()
            try:
                transport.send(encode(message_of(rid)))
            except OSError:
                self._pending.pop(rid, None)
                return "the link to the engine dropped; nothing was sent"
        if not pending.done.wait(timeout):
            with self._lock:
                self._pending.pop(rid, None)
            return (f"the engine did not answer within {timeout:g} s; the events log tells "
                    "whether it was done")
        return pending.reply or {}

    def _call(self, kind: ActionKind, timeout: float = ACTION_TIMEOUT_S, **args) -> ActionResult:
        reply = self._ask(lambda rid: action_message(rid, kind, **args), timeout)
        if isinstance(reply, str):
            return ActionResult(False, reply)
        return ActionResult(bool(reply.get("ok")), str(reply.get("message", "")))

    def ping(self, timeout: float = 5.0) -> bool:
        reply = self._ask(lambda rid: {"op": "ping", "id": rid}, timeout)
        return isinstance(reply, dict) and bool(reply.get("ok"))

    def checkpoint(self, run_id: str) -> ActionResult:
        return self._call(ActionKind.CHECKPOINT, run=run_id)

    def drop(self, variant_id: str, at_decision: bool = False) -> ActionResult:
        return self.drop_many([variant_id], at_decision)

    def drop_many(self, variant_ids, at_decision: bool = False) -> ActionResult:
        return self._call(ActionKind.DROP, variants=list(variant_ids), at_decision=at_decision)

    def stop(self, run_id: str, reason: str) -> ActionResult:
        return self._call(ActionKind.STOP, run=run_id, reason=reason)

    def pause(self, paused: bool) -> ActionResult:
        return self._call(ActionKind.PAUSE, paused=paused)

    def decide(self, decision: Decision) -> ActionResult:
        return self._call(ActionKind.DECIDE, decision=decision.text)

    def shutdown(self) -> ActionResult:
        return self._call(ActionKind.SHUTDOWN)

    def start_wrapup(self, on_line: Callable[[str], None] | None = None) -> ActionResult:
        with self._lock:
            self._wrapup_line = on_line
        return self._call(ActionKind.WRAPUP)

    def wrapup_progress(self) -> WrapupProgress:
        with self._lock:
            return self._snapshot.wrapup if self._snapshot is not None else WrapupProgress()

    @property
    def wrapup_running(self) -> bool:
        return self.wrapup_progress().running

    def wait_wrapup(self, timeout: float | None = None) -> WrapupProgress:
        deadline = None if timeout is None else time.monotonic() + timeout
        while deadline is None or time.monotonic() < deadline:
            progress = self.wrapup_progress()
            if progress.ok is not None or self._closed.is_set():
                return progress
            time.sleep(0.2)
        return self.wrapup_progress()

    def follow_wrapup(self, before: WrapupProgress,
                      on_line: Callable[[float, str], None] | None = None,
                      timeout: float | None = None) -> WrapupProgress:
        """Follow the wrap-up asked for after `before` (the progress seen just before
        asking) to its end: its lines with the times they were said, then its result.
        A wrap-up that was running already is that one; one that had ended is not: its
        verdict is not the answer to a new request."""
        deadline = None if timeout is None else time.monotonic() + timeout
        seen = 0
        while True:
            progress = self.wrapup_progress()
            ours = progress.started_t is not None and (
                progress.started_t != before.started_t or before.running)
            if ours:
                times = progress.times + (None,) * (len(progress.lines) - len(progress.times))
                for t, line in zip(times[seen:], progress.lines[seen:]):
                    if on_line is not None:
                        on_line(self.clock() if t is None else t, line)
                seen = len(progress.lines)
                if progress.ok is not None:
                    return progress
            if self._closed.is_set() or (deadline is not None and time.monotonic() > deadline):
                return progress if ours else WrapupProgress()
            time.sleep(0.2)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            transport = self._transport
            self._transport = None
        if transport is not None:
            transport.close()
