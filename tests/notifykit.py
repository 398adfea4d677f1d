"""A notice receiver for tests: a real HTTP server on 127.0.0.1 that Apprise posts to.

`json://127.0.0.1:PORT/PATH` makes Apprise POST `{"title", "message", ...}` here.
The receiver answers 200, or 500 (`mode="500"`), or only after `delay` seconds
(`mode="slow"`); `down_url()` names a port nothing listens on. Every receiver is
ended by the fixture that started it, whatever the test's outcome.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    def __init__(self, mode: str = "ok", delay: float = 10.0):
        self.mode = mode
        self.delay = delay
        self.received: list[dict] = []  # every POST, in arrival order
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                size = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(size)
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = {"raw": raw.decode("utf-8", "replace")}
                if receiver.mode == "slow":
                    time.sleep(receiver.delay)
                with receiver._lock:
                    receiver.received.append(dict(body, path=self.path))
                self.send_response(500 if receiver.mode == "500" else 200)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def url(self, path: str = "hook/s3cretTOKEN42") -> str:
        return f"json://127.0.0.1:{self.port}/{path}"

    def notices(self) -> list[dict]:
        with self._lock:
            return list(self.received)

    def titles(self) -> list[str]:
        return [n.get("title", "") for n in self.notices()]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def down_url(path: str = "hook/s3cretTOKEN42") -> str:
    """An address on 127.0.0.1 where nothing listens (the port was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"json://127.0.0.1:{port}/{path}"
