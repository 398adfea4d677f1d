"""`itera-tui attach --stdio`: the engine's socket on stdin/stdout, for ssh.

As `docker system dial-stdio` does for Docker's ssh transport: a room on
another box runs `ssh BOX itera-tui attach --stdio DIR` and speaks the same
protocol through the pipe, with the user's own OpenSSH client, keys and
config. The bridge only copies bytes both ways (it reads no message, so it
adds no parsing a hostile peer could reach); the engine on the other end
checks every line as it does for a local client. When the engine is not
running the bridge answers one protocol `error` line and exits 4.
"""

from __future__ import annotations

import json
import os
import selectors
import socket
import sys

EXIT_NO_ENGINE = 4


def _error_line(message: str) -> bytes:
    return (json.dumps({"op": "error", "message": message}) + "\n").encode()


def refuse(message: str, stdout_fd: int | None = None) -> None:
    """Answer the hello with one protocol `error` line: the far room prints `message`
    as its refusal (a plan `check` refuses, in `check`'s words)."""
    os.write(sys.stdout.fileno() if stdout_fd is None else stdout_fd, _error_line(message))


def bridge(sock_path, stdin_fd: int | None = None, stdout_fd: int | None = None) -> int:
    """Copy stdin to the socket and the socket to stdout until either side ends."""
    stdin_fd = sys.stdin.fileno() if stdin_fd is None else stdin_fd
    stdout_fd = sys.stdout.fileno() if stdout_fd is None else stdout_fd
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(str(sock_path))
    except OSError:
        sock.close()
        os.write(stdout_fd, _error_line("no engine is running for this campaign on that "
                                        "box (`itera-tui engine start` there starts it)"))
        return EXIT_NO_ENGINE
    selector = selectors.DefaultSelector()
    selector.register(stdin_fd, selectors.EVENT_READ, "in")
    selector.register(sock, selectors.EVENT_READ, "sock")
    try:
        while True:
            for key, _ in selector.select():
                if key.data == "in":
                    data = os.read(stdin_fd, 65536)
                    if not data:
                        return 0
                    sock.sendall(data)
                else:
                    data = sock.recv(1 << 20)
                    if not data:
                        return 0
                    view = memoryview(data)
                    while view:
                        view = view[os.write(stdout_fd, view):]
    except (BrokenPipeError, ConnectionError, OSError):
        return 0
    finally:
        selector.close()
        sock.close()
