"""`itera-tui check` in the test's own process, for fast-tier tests (no interpreter to
start): the CLI's `main` with its stdout and stderr captured."""

from __future__ import annotations

import contextlib
import io
from dataclasses import dataclass


@dataclass(frozen=True)
class Checked:
    returncode: int
    stdout: str
    stderr: str


class _Kept(io.StringIO):
    """The CLI wraps its streams in a TerminalGuard, which closes the stream under it
    when it is collected (io.IOBase.__del__): the text stays readable here."""

    def close(self) -> None:
        pass


def check(*args: str) -> Checked:
    from tui.cli import main

    out, err = _Kept(), _Kept()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(["check", *args])
    return Checked(rc, out.getvalue(), err.getvalue())
