"""The verifier process itself: started fresh, read by two threads, always killable.

`VerifierClient` keeps the queue; this module keeps one process: a fresh
interpreter importing this copy of `tui` (`fresh_env`), its stdout read line
by line into the client's event queue (one JSON verdict per line; the end of
the stream says the process is gone), its stderr drained so it can never
block on a full pipe (the last lines kept to explain a death). Like the
engine's other verifiers it is SIGKILLed if the thread that started it dies
(`die_with_parent`), and it exits by itself when its stdin closes.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import tui

from .verification import die_with_parent

REPO_ROOT = Path(tui.__file__).resolve().parents[1]


def fresh_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a fresh process that imports this copy of `tui`."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


@dataclass
class Worker:
    """One verifier process and the threads that read it."""

    popen: subprocess.Popen
    events: "queue.Queue[tuple[int, dict | None]]"
    generation: int
    started_t: float
    ready_t: float | None = None  # when it said it is ready (torch imported)
    stderr_tail: deque = field(default_factory=lambda: deque(maxlen=8))


def _read_stdout(worker: Worker) -> None:
    for raw in worker.popen.stdout:
        try:
            obj = json.loads(raw)
        except (ValueError, RecursionError):
            continue  # the verifier writes only verdicts; anything else is noise
        if isinstance(obj, dict):
            worker.events.put((worker.generation, obj))
    worker.events.put((worker.generation, None))  # end of stream: the process is gone


def _read_stderr(worker: Worker) -> None:
    for raw in worker.popen.stderr:
        line = raw.decode("utf-8", "replace").strip()
        if line:
            worker.stderr_tail.append(line[:300])


def kill(popen: subprocess.Popen) -> None:
    if popen.poll() is None:
        try:
            popen.kill()
        except OSError:
            pass
    try:
        popen.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def start(command: list[str], env: dict[str, str], cwd, events: queue.Queue,
          generation: int) -> Worker:
    import ctypes  # noqa: F401 - loaded before the fork, for die_with_parent in the child

    popen = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env, cwd=cwd, close_fds=True,
                             preexec_fn=die_with_parent)
    worker = Worker(popen, events, generation, time.monotonic())
    for target in (_read_stdout, _read_stderr):
        threading.Thread(target=target, args=(worker,), daemon=True,
                         name=f"itera-verifier-{target.__name__}").start()
    return worker
