"""`itera-tui ARGS` in the test's own process: the fast tier's way to run the command
line (`conftest.run_cli` starts a real interpreter, seconds of a 2-core box, and is kept
for the tests about the real command line: exit statuses through an interpreter, the
README's commands, signals, detached engines).

`cli(*argv, cwd=, env=)` calls `tui.cli.main(argv)` with its streams captured and hands
back what `run_cli` does (returncode, stdout, stderr). Whatever the call changes of the
process is put back after it, whatever happens: the working folder, the environment
(and the time zone read from it), the signal handlers, sys.stdin/stdout/stderr, the
root logger and the umask. stdin is an empty, non-terminal stream, as for a command
run from a script: a command that asks a person reads "no answer". PYTHONPATH leads
with this checkout for the call, as `run_cli` gives it, so a process the command starts
(a verifier, an engine) imports the code under test."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import signal
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from conftest import REPO


@dataclass(frozen=True)
class Ran:
    """What one command printed and its exit status (the fields of a CompletedProcess
    a test reads, so a test reads the same either way)."""

    returncode: int
    stdout: str
    stderr: str


class _Kept(io.StringIO):
    """The CLI wraps its streams in a TerminalGuard, which closes the stream under it
    when it is collected (io.IOBase.__del__): the text stays readable here."""

    def close(self) -> None:
        pass


def _exit_status(exc: SystemExit, err: io.StringIO) -> int:
    """What the interpreter makes of a SystemExit: None is 0, a number itself, any
    other value printed to stderr and 1 (argparse's errors exit 2 with a number)."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=err)
    return 1


def _catchable() -> list[signal.Signals]:
    return [s for s in signal.valid_signals()
            if s not in (signal.SIGKILL, signal.SIGSTOP)
            and signal.getsignal(s) is not None]  # None: set outside Python, left alone


@contextlib.contextmanager
def _process_kept():
    """Put back the process state a command may change (see the module docstring)."""
    cwd, environ = os.getcwd(), dict(os.environ)
    handlers = {s: signal.getsignal(s) for s in _catchable()}
    streams = sys.stdin, sys.stdout, sys.stderr
    root = logging.getLogger()
    root_level, root_handlers = root.level, list(root.handlers)
    mask = os.umask(0o022)
    os.umask(mask)
    try:
        yield
    finally:
        os.chdir(cwd)
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        time.tzset()
        for s, handler in handlers.items():
            if signal.getsignal(s) is not handler:
                signal.signal(s, handler)
        sys.stdin, sys.stdout, sys.stderr = streams
        root.setLevel(root_level)
        root.handlers[:] = root_handlers
        os.umask(mask)


def cli(*argv: str | os.PathLike, cwd: Path | str | None = None,
        env: dict[str, str] | None = None) -> Ran:
    """`itera-tui ARGV` run in this process from `cwd` with `env` added to the
    environment for the call (a value of None takes the variable away)."""
    from tui.cli import main

    out, err = _Kept(), _Kept()
    with _process_kept():
        if cwd is not None:
            os.chdir(cwd)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        for key, value in (env or {}).items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        if env and "TZ" in env:
            time.tzset()
        sys.stdin = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main([str(a) for a in argv])
            except SystemExit as exc:
                rc = _exit_status(exc, err)
    return Ran(int(rc or 0), out.getvalue(), err.getvalue())


def check(*args: str | os.PathLike, cwd: Path | str | None = None,
          env: dict[str, str] | None = None) -> Ran:
    """`itera-tui check ARGS` in this process."""
    return cli("check", *args, cwd=cwd, env=env)
