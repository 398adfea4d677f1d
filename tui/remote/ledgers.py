"""Another box's ledger, read over ssh, for the first box's `status` while a fleet runs.

`status` tells the fleet's one state: before the wrap-up has pulled every box's
part (tui.remote.pull), each other box's ledger is read where it is, with one
bounded ssh call (`cat`, nothing started or locked there), and its runs' events
join this box's. A box that does not answer is named with why, never waited on
past its deadline.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..campaign.boxes import BoxShare
from ..engine.ledger.file import read_ledger_report
from .hosts import printable
from .ssh import Ssh, SshSettings

READ_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class FarLedger:
    """One other box's ledger events (empty when not read), or why it was not read."""

    box: str
    events: tuple[dict, ...] = ()
    missing: str | None = None

    def to_dict(self) -> dict:
        return {"box": self.box, "events": len(self.events), "missing": self.missing}


def read_far_ledger(share: BoxShare, settings: SshSettings | None = None,
                    timeout_s: float = READ_TIMEOUT_S) -> FarLedger:
    settings = settings or SshSettings.from_env()
    ssh = Ssh(share.host, settings)
    path = f"{share.dir or '.'}/.itera/ledger.jsonl"
    result = ssh.run_script('cd "$HOME" 2>/dev/null\n'  # `dir` is from the far home
                            f"cat {shlex.quote(path)} 2>/dev/null || echo 'itera: none' >&2\n",
                            timeout_s=timeout_s)
    if result.unreachable or result.returncode is None:
        return FarLedger(share.box, missing=f"not reached: {printable(result.reason())}")
    if "itera: none" in result.stderr:
        return FarLedger(share.box, missing="no ledger there yet (its engine has not started)")
    fd, name = tempfile.mkstemp(prefix="itera-far-ledger-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(result.stdout)
        events = read_ledger_report(Path(name)).events
    finally:
        os.unlink(name)
    return FarLedger(share.box, tuple(events))
