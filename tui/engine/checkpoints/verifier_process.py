"""The verifier process itself: started fresh and isolated, read by two threads, always killable.

`VerifierClient` keeps the queue; this module keeps one process: a fresh
interpreter importing this copy of `tui` and nothing else from where it was
started (`isolated_command`, `isolated_env`, `NEUTRAL_CWD`: `python -P` in `/`,
so a `json.py`, `torch.py` or `tui/` planted in a bundle someone `cd`s into is
never imported; an environment naming only what a Python needs), its stdout read line
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
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import tui


def die_with_parent() -> None:
    """In the child, before exec: SIGKILL when the engine dies (even by kill -9), so a
    verifier is never orphaned beside the next engine's (Linux; elsewhere a no-op).
    Linux sends it when the *thread* that started the child ends: the engine is
    ticked by one long-lived thread per face (headless: main; room: the pump)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass



REPO_ROOT = Path(tui.__file__).resolve().parents[1]


def fresh_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a fresh process that imports this copy of `tui`."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


# A helper that reads untrusted files (a bundle, a checkpoint) runs in a directory
# nobody plants modules in, with `-P` (CPython's safe_path: neither the working
# directory nor a script's folder is put on sys.path), and an environment that
# names only what a Python and torch need: PYTHONPATH is this copy of `tui`
# plus the caller's own absolute entries (a relative one would name the cwd).
NEUTRAL_CWD = "/"
ISOLATION_FLAGS = ("-P",)
_KEPT_NAMES = frozenset({
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TEMP", "TMP",
    "PYTHONHOME", "PYTHONUNBUFFERED", "PYTHONIOENCODING", "PYTHONNOUSERSITE",
    "PYTHONHASHSEED", "VIRTUAL_ENV", "CONDA_PREFIX", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
    "CUDA_VISIBLE_DEVICES", "MPLBACKEND", "MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME",
    "TORCH_HOME", "SYSTEMROOT",
    # where an adapter's base lives (the hub cache, read offline) and how big a base the
    # reload check loads: named, not secrets (HF_TOKEN is not kept)
    "HF_HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_CACHE", "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE", "ITERA_ADAPTER_BASE_MAX_GB",
})
_KEPT_PREFIXES = ("LC_",)


def isolated_command(module: str, *args: str, python: str = sys.executable) -> list[str]:
    """`python -P -m MODULE ARGS`: the argv of an isolated helper process."""
    return [python, *ISOLATION_FLAGS, "-m", module, *args]


def isolated_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of an isolated helper: see NEUTRAL_CWD's comment."""
    source = dict(os.environ if base is None else base)
    env = {k: v for k, v in source.items()
           if k in _KEPT_NAMES or k.startswith(_KEPT_PREFIXES)}
    theirs = [p for p in source.get("PYTHONPATH", "").split(os.pathsep)
              if p and os.path.isabs(p) and p != str(REPO_ROOT)]
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), *theirs])
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # importing a bundle's code/ never writes into it
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
