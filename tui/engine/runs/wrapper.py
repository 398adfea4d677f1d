"""`python -m tui.engine.runs.wrapper EXIT_FILE -- ARGV...`: run a training command and
record its exit status in a file.

The engine starts each run through this tiny stdlib launcher, in its own
process session, so the exit status survives a restart of the control room:
a run that ends while nobody watches still leaves `exit.json` behind. The
launcher forwards nothing: a stop signal goes to the whole process group, and
the launcher's own handler only keeps it alive long enough to record the
child's status (handlers, unlike SIG_IGN, are not inherited through exec).
`exit.json` is written before the launcher exits, so a launcher that nobody
reaps (a zombie under a container's PID 1) has already left its status; a
full disk costs the file (said on stderr), never the run's own exit status.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time


def _write_exit(path: str, record: dict) -> None:
    tmp = f"{path}.tmp"
    try:
        with open(tmp, "w") as f:
            json.dump(record, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        print(f"itera-tui: cannot write {path} ({exc.strerror or exc}); the run exited "
              f"with status {record.get('exit_code')}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m tui.engine.runs.wrapper EXIT_FILE -- ARGV...", file=sys.stderr)
        return 2
    exit_file, command = argv[0], argv[2:]
    received: list[int] = []
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda signum, frame: received.append(signum))
    try:
        child = subprocess.Popen(command)
    except OSError as exc:
        print(f"itera-tui: cannot start {command[0]!r}: {exc}", file=sys.stderr, flush=True)
        _write_exit(exit_file, {"exit_code": 127, "t": time.time(), "error": str(exc)})
        return 127
    while True:
        try:
            code = child.wait()
            break
        except InterruptedError:  # pragma: no cover - PEP 475 retries for us
            continue
    _write_exit(exit_file, {"exit_code": code, "t": time.time(),
                            "signals_seen": sorted(set(received))})
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
