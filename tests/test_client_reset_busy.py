"""An engine flooded with connections (3,000 at once, issue 45) resets some during the
hello: the client heard "Connection reset by peer" and said the engine's link failed.
A reset from a socket that accepted us is an engine that cannot take us now: retried
briefly, then said as busy (exit 6, `itera-tui` waits and asks again), never as gone."""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from tui.service import client as client_module
from tui.service.client import EngineBusy, EngineClient, unix_transport


class Resetting:
    """A unix socket that accepts, lets the hello arrive unread, and closes with it
    unread: the kernel answers the client's read with ECONNRESET."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(16)
        self.accepted = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        self.sock.settimeout(0.1)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.accepted += 1
            conn.recv(1, socket.MSG_PEEK)  # the hello is there, left unread
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            conn.close()

    def close(self):
        self._stop.set()
        self._thread.join(5)
        self.sock.close()


def test_a_reset_during_the_hello_is_said_busy_after_a_retry(tmp_path, monkeypatch):
    monkeypatch.setattr(client_module, "BUSY_RETRY_S", 0.5)
    server = Resetting(tmp_path / "engine.sock")
    try:
        with pytest.raises(EngineBusy, match="the engine is busy: it reset the connection "
                                             "during the hello"):
            EngineClient(unix_transport(tmp_path / "engine.sock"), reconnect=False).open()
        assert server.accepted >= 2  # asked again before saying busy
    finally:
        server.close()
