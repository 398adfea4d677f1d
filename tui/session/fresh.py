"""`itera-tui new`: start a campaign over on purpose, keeping the last one.

A campaign's memory is `.itera/` (the frozen plan, the ledger, the runs) and its
bundle lives in the outputs folder. Starting afresh never deletes them: both
move into `archive/<UTC time>/` beside `campaign.toml`, and the command says
what moved where. It refuses while a control room or a headless run drives the
campaign (the engine lock), and it asks first unless told `--yes`.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from ..engine.lock import take_engine_lock


@dataclass(frozen=True)
class Archived:
    archive: Path
    moved: tuple[str, ...]  # relative to the campaign folder


def _check_not_driven(state_dir: Path) -> None:
    if state_dir.is_dir():
        take_engine_lock(state_dir, "stop it first (`itera-tui engine stop`; q only closes "
                         "the room) before starting afresh").close()


def what_would_move(plan) -> list[Path]:
    return [p for p in (plan.state_dir, plan.outputs_dir) if p.exists()]


def archive_campaign(plan, now: float | None = None) -> Archived:
    """Move `.itera/` and the outputs folder into `archive/<UTC>/`; returns what moved."""
    _check_not_driven(plan.state_dir)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    archive = plan.root / "archive" / stamp
    moved = []
    for path in what_would_move(plan):
        archive.mkdir(parents=True, exist_ok=True)
        target = archive / path.name
        os.replace(path, target)  # same filesystem: a rename, nothing copied or lost
        moved.append(str(path.relative_to(plan.root)))
    return Archived(archive, tuple(moved))
