"""The socket hub: the engine's owner-only socket, its clients and their output buffers.

One I/O thread owns the sockets (non-blocking, `selectors`), so a slow or
stuck client never holds the engine's loop. It reads request lines, answers
`hello` and `ping` itself (they need nothing from the loop) and hands every
other request to the loop through `submit`. Each client's output is bounded:
a client that falls `MAX_BACKLOG` behind is dropped (it reconnects from the
last seq it got).
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .protocol import (PROTOCOL_VERSION, Hello, Ping, ProtocolError, encode, parse_request,
                       MAX_REQUEST_BYTES)

MAX_BACKLOG = 32 * 1024 * 1024  # bytes of events a client may fall behind before it is dropped


@dataclass
class Client:
    sock: socket.socket
    name: str = "?"
    rbuf: bytearray = field(default_factory=bytearray)
    wbuf: bytearray = field(default_factory=bytearray)
    greeted: bool = False
    subscribed: bool = False
    snapshots: bool = False
    last_seq: int = -1
    closing: bool = False
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
                 clock: Callable[[], float] = time.monotonic):
        self.socket_file = Path(socket_file)
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
        sock.listen(16)
        sock.setblocking(False)
        self._listener = sock
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
        uid = peer_uid(sock)
        if uid is not None and uid != os.getuid():  # the 0600 mode already says so
            sock.close()
            return
        sock.setblocking(False)
        client = Client(sock)
        with self.lock:
            self.clients[sock.fileno()] = client
            self._selector.register(sock, selectors.EVENT_READ, client)
        self.last_client_t = self.monotonic()

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
            if len(client.wbuf) + len(data) > MAX_BACKLOG:
                client.closing = True  # it reconnects from the last seq it got
                return
            client.wbuf += data
        self.poke()

    def _flush(self, client: Client) -> None:
        with self.lock:
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
        with self.lock:
            for fd, client in list(self.clients.items()):
                if client.closing:
                    if client.wbuf:
                        self._flush(client)  # the last words (an error, a bye), best effort
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
        self.last_client_t = self.monotonic()
