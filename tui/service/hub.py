"""The socket hub: the engine's owner-only socket, its clients and their output buffers.

One I/O thread owns the sockets (non-blocking, `selectors`), so a slow or
stuck client never holds the engine's loop. It reads request lines, answers
`hello` and `ping` itself (they need nothing from the loop) and hands every
other request to the loop through `submit`. The clients' output is bounded
(outbox.py): a client that falls too far behind, or reads nothing for too
long, or has the most unsent when all of them together hold too much, is
dropped with the reason and reconnects from the last seq it got.

Connections never take the engine's file descriptors: a user holds at most
`clients_per_uid` of them (a quarter of the process's limit, at most
`MAX_CLIENTS_PER_UID`); one more is answered "busy" and closed, and the
listen backlog is deep enough that a flood is answered rather than left
hanging. An accept that fails for want of descriptors is the hub's problem,
never the ledger's: a reserved descriptor is let go to answer it "busy".
"""

from __future__ import annotations

import errno
import json
import os
import resource
import selectors
import socket
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .outbox import Outbox, OutboxLimits
from .protocol import (PROTOCOL_VERSION, Hello, Ping, ProtocolError, encode, parse_request,
                       MAX_REQUEST_BYTES)

MAX_BACKLOG = OutboxLimits().per_client  # bytes one client may fall behind before it is dropped
LISTEN_BACKLOG = min(1024, socket.SOMAXCONN)  # a burst of connects is answered, not EAGAIN
MAX_CLIENTS_PER_UID = 256
REFILL_BELOW = 256 * 1024  # a catching-up client's past events are encoded as it reads
HELLO_WITHIN_S = 10.0  # a connection that has not said hello by then gives its slot back
ACCEPT_PAUSE_S = 0.5  # out of descriptors even with the reserve let go: stop accepting a moment
BUSY = "busy"  # the first word of the refusal a client retries on (client.py)


def clients_per_uid(limit: int | None = None) -> int:
    """Connections one user may hold: a quarter of the descriptor limit (the rest is the
    engine's: the ledger, the runs' files, the verifiers), at most MAX_CLIENTS_PER_UID."""
    if limit is None:
        limit = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        if limit == resource.RLIM_INFINITY:
            limit = 1 << 20
    return max(4, min(MAX_CLIENTS_PER_UID, limit // 4))


@dataclass
class Client:
    sock: socket.socket
    name: str = "?"
    rbuf: bytearray = field(default_factory=bytearray)
    wbuf: Outbox = field(default_factory=Outbox)  # its unsent frames
    greeted: bool = False
    subscribed: bool = False
    snapshots: bool = False
    last_seq: int = -1
    closing: bool = False
    uid: int | None = None
    opened_t: float = 0.0
    drained_t: float = 0.0  # when it last read (or had nothing waiting)
    replay: deque = field(default_factory=deque)  # events still to send it, encoded as it reads
    linger_until: float = 0.0  # closing: its last frame and reason may go out until then
    waiting: int = 0  # its requests still waiting for the engine's loop (server.py bounds it)


def peer_uid(sock: socket.socket) -> int | None:
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", creds)[1]
    except (OSError, AttributeError):
        return None


class SocketHub:
    """The listener and the clients; `greet()` is the hello's answer, `submit(client,
    request)` hands a subscription or an action to the engine's loop."""

    def __init__(self, socket_file: Path, greet: Callable[[], dict],
                 submit: Callable[[Client, object], None],
                 clock: Callable[[], float] = time.monotonic,
                 limits: OutboxLimits = OutboxLimits(),
                 say: Callable[[str], None] | None = None,
                 encode_event: Callable[[dict], bytes] | None = None):
        self.socket_file = Path(socket_file)
        self.limits = limits
        self.say = say
        self.encode_event = encode_event or (lambda ev: encode({"op": "event", "event": ev}))
        self.unsent = 0  # bytes in every client's outbox together (never over limits.total)
        self.dropped_behind = 0  # clients dropped for falling behind
        self.greet = greet
        self.submit = submit
        self.monotonic = clock
        self.clients: dict[int, Client] = {}
        self.lock = threading.RLock()
        self._stop = threading.Event()
        self._selector = selectors.DefaultSelector()
        self._pipe_r, self._pipe_w = os.pipe()
        os.set_blocking(self._pipe_r, False)
        os.set_blocking(self._pipe_w, False)
        self._listener: socket.socket | None = None
        self._io_thread: threading.Thread | None = None
        self.last_client_t = self.monotonic()
        self.per_uid = clients_per_uid()
        self.busy_refused = 0  # connections answered "busy" (the cap, or no descriptor left)
        self._reserve: int | None = None  # a descriptor let go to answer when none is left
        self._accept_paused_until = float("-inf")

    def listen(self) -> None:
        """Bind the owner-only socket (the engine lock is already ours: a socket file
        left there is a dead engine's)."""
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
        sock.listen(LISTEN_BACKLOG)
        sock.setblocking(False)
        self._listener = sock
        self._reserve = os.open(os.devnull, os.O_RDONLY)
        self._selector.register(sock, selectors.EVENT_READ, "listen")
        self._selector.register(self._pipe_r, selectors.EVENT_READ, "wake")
        self._io_thread = threading.Thread(target=self._io_loop, name="itera-io", daemon=True)
        self._io_thread.start()

    def say_bye(self, reason: str) -> None:
        """Tell every client why the engine goes (before `close`), so a room says it."""
        with self.lock:
            for client in self.clients.values():
                if client.greeted:
                    self.send(client, {"op": "bye", "reason": reason})
        deadline = self.monotonic() + 2.0
        while self.monotonic() < deadline:  # let the I/O thread flush the last words
            with self.lock:
                if not any(c.wbuf for c in self.clients.values()):
                    return
            time.sleep(0.02)

    def close(self) -> None:
        self._stop.set()
        self.poke()
        if self._io_thread is not None and self._io_thread is not threading.current_thread():
            self._io_thread.join(5)
        with self.lock:
            for client in list(self.clients.values()):
                try:
                    client.sock.close()
                except OSError:
                    pass
            self.clients.clear()
            self.unsent = 0
        if self._listener is not None:
            self._listener.close()
            try:
                self.socket_file.unlink()
            except OSError:
                pass
        for fd in (self._pipe_r, self._pipe_w, self._reserve):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass
        self._reserve = None

    def client_count(self) -> int:
        with self.lock:
            return sum(1 for c in self.clients.values() if c.greeted)

    def poke(self) -> None:
        try:
            os.write(self._pipe_w, b"x")
        except (BlockingIOError, OSError):
            pass

    def _io_loop(self) -> None:
        while not self._stop.is_set():
            with self.lock:
                for client in self.clients.values():
                    want = selectors.EVENT_READ | (selectors.EVENT_WRITE if client.wbuf else 0)
                    try:
                        self._selector.modify(client.sock, want, client)
                    except (KeyError, ValueError, OSError):
                        pass
            try:
                ready = self._selector.select(timeout=self._select_timeout())
            except OSError:
                continue
            for key, mask in ready:
                if key.data == "listen":
                    if self.monotonic() >= self._accept_paused_until:
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

    def _select_timeout(self) -> float:
        """While accepting is paused the listener stays readable: wake when it resumes
        (the listener's readiness is then ignored, never spun on)."""
        left = self._accept_paused_until - self.monotonic()
        return min(1.0, left) if left > 0 else 1.0

    def _accept(self) -> None:
        try:
            sock, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                self._out_of_descriptors()
            return
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():  # the 0600 mode already says so
            sock.close()
            return
        with self.lock:
            held = sum(1 for c in self.clients.values() if c.uid == uid)
        if held >= self.per_uid:
            self._refuse_busy(sock, f"{held} connections from this user are open (the "
                              f"most one user may hold: {self.per_uid})")
            return
        sock.setblocking(False)
        now = self.monotonic()
        client = Client(sock, uid=uid, opened_t=now, drained_t=now)
        with self.lock:
            self.clients[sock.fileno()] = client
            self._selector.register(sock, selectors.EVENT_READ, client)
        self.last_client_t = self.monotonic()

    def _out_of_descriptors(self) -> None:
        """No descriptor for a new connection: let the reserve go, take the connection,
        answer it "busy", take the reserve back. Nothing else in the engine notices."""
        sock = None
        if self._reserve is not None:
            os.close(self._reserve)
            self._reserve = None
            try:
                sock, _ = self._listener.accept()
            except OSError:
                sock = None
            if sock is not None:
                self._refuse_busy(sock, "the engine has no file descriptor left for another "
                                  "connection")
        try:
            self._reserve = os.open(os.devnull, os.O_RDONLY)
        except OSError:
            self._reserve = None
        if self._reserve is None or sock is None:
            self._accept_paused_until = self.monotonic() + ACCEPT_PAUSE_S

    def _refuse_busy(self, sock: socket.socket, why: str) -> None:
        """One line saying why (a client retries briefly on "busy"), then closed."""
        self.busy_refused += 1
        try:
            sock.setblocking(False)
            sock.send(encode({"op": "error", "message": f"{BUSY}: {why}; try again when "
                              "fewer clients are attached"}))
        except OSError:
            pass
        finally:
            sock.close()

    def _read(self, client: Client) -> None:
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
                    self.send(client, {"op": "error", "message":
                                       f"message longer than {MAX_REQUEST_BYTES} bytes"})
                    client.rbuf.clear()
                return
            line = bytes(client.rbuf[:nl])
            del client.rbuf[:nl + 1]
            if line.strip():
                self._request(client, line)

    def _request(self, client: Client, line: bytes) -> None:
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
            self.send(client, {"op": "error", "id": rid, "message": str(exc)})
            return
        if isinstance(request, Hello):
            if request.protocol != PROTOCOL_VERSION:
                self.send(client, {"op": "error", "message":
                                   f"protocol {request.protocol} not spoken here: this "
                                   f"engine speaks protocol {PROTOCOL_VERSION} (use the same "
                                   "itera-tui version on both sides)"})
                client.closing = True
                return
            client.name, client.greeted = request.client, True
            self.send(client, self.greet())
            return
        if not client.greeted:
            self.send(client, {"op": "error", "message": "say hello first"})
            return
        if isinstance(request, Ping):
            self.send(client, {"op": "result", "id": request.id, "ok": True,
                               "message": "pong"})
            return
        self.submit(client, request)  # subscribe and actions: on the loop's thread

    def send(self, client: Client, message: dict | bytes) -> None:
        data = message if isinstance(message, bytes) else encode(message)
        with self.lock:
            if client.closing:
                return
            if len(client.wbuf) + len(data) > self.limits.per_client:
                self._behind(client, f"it fell {len(client.wbuf) + len(data)} bytes behind "
                             f"(the most one client may: {self.limits.per_client})")
                return
            if not client.wbuf:
                client.drained_t = self.monotonic()  # the stall clock starts now
            client.wbuf.append(data)
            self.unsent += len(data)
            if self.unsent > self.limits.total:
                self._shed()
        self.poke()

    def queue_events(self, client: Client, events) -> None:
        """Events for a client, after those it is still owed: a reconnect's whole past is
        kept as the events themselves and encoded only as the client reads (never more
        than `REFILL_BELOW` of it waiting), so catching up is never "falling behind"."""
        with self.lock:
            if client.closing:
                return
            client.replay.extend(events)
            self._refill(client)
        self.poke()

    def _refill(self, client: Client) -> None:
        while client.replay and len(client.wbuf) < REFILL_BELOW and not client.closing:
            data = self.encode_event(client.replay.popleft())
            if not client.wbuf:
                client.drained_t = self.monotonic()
            client.wbuf.append(data)
            self.unsent += len(data)
        if self.unsent > self.limits.total:
            self._shed()

    def _shed(self) -> None:
        """All clients together hold too much: drop the furthest behind until they fit."""
        while self.unsent > self.limits.total:
            live = [c for c in self.clients.values() if not c.closing and c.wbuf]
            if not live:
                return
            worst = max(live, key=lambda c: len(c.wbuf))
            self._behind(worst, f"it was the furthest behind ({len(worst.wbuf)} bytes) when "
                         f"all clients together held more than {self.limits.total}")

    def _behind(self, client: Client, why: str) -> None:
        """Drop a client that fell behind, keeping only the frame it is in the middle of
        and the reason (it reconnects from the last seq it got, missing nothing)."""
        self.unsent -= client.wbuf.cut_to_current()
        client.replay.clear()
        bye = encode({"op": "bye", "reason": f"this client was dropped: {why}; it "
                      "reconnects from the last event it got"})
        client.wbuf.append(bye)
        self.unsent += len(bye)
        client.closing = True
        client.linger_until = self.monotonic() + self.limits.linger_s
        self.dropped_behind += 1
        if self.say is not None:
            self.say(f"client {client.name!r} dropped: {why}")

    def _flush(self, client: Client) -> None:
        with self.lock:
            if not client.wbuf:
                return
            try:
                sent = client.sock.send(client.wbuf.peek(1 << 20))
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                client.closing = True
                client.linger_until = 0.0
                return
            client.wbuf.consume(sent)
            self.unsent -= sent
            if sent:
                client.drained_t = self.monotonic()
            if client.replay:
                self._refill(client)

    def _reap(self) -> None:
        now = self.monotonic()
        with self.lock:
            for fd, client in list(self.clients.items()):
                if not client.greeted and now - client.opened_t > HELLO_WITHIN_S:
                    client.closing = True  # a silent connection never holds a slot
                if not client.closing and client.wbuf and \
                        now - client.drained_t > self.limits.stall_s:
                    self._behind(client, f"it read nothing for {self.limits.stall_s:g} s")
                if client.closing:
                    if client.wbuf:
                        self._flush(client)  # the last words (an error, a bye), best effort
                        if client.wbuf and now < client.linger_until:
                            continue  # a dropped client's reason: a moment more to go out
                    self._drop(fd, client)

    def _drop(self, fd: int, client: Client) -> None:
        try:
            self._selector.unregister(client.sock)
        except (KeyError, ValueError, OSError):
            pass
        try:
            client.sock.close()
        except OSError:
            pass
        self.clients.pop(fd, None)
        self.unsent -= len(client.wbuf)
        client.wbuf = Outbox()
        self.last_client_t = self.monotonic()
