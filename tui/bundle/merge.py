"""Folding the other boxes' pulled parts into the first box's bundle build.

Each merged part brings its run events (replayed with this box's), its run
directories (copied like local ones) and its own ledger, kept in the bundle as
`boxes/<box>/ledger.jsonl`. Its files are staged with a scrubber for its own
campaign folder there, so no path of that box reaches the bundle either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..engine.ledger.file import read_ledger
from ..engine.ledger.state import replay
from .parts import Part, run_events
from .paths import LogRedactor, Scrubber
from .stage import Stager


@dataclass
class Merged:
    """What the merged parts add to a build: events, run folders, stagers, boxes."""

    events: list[dict] = field(default_factory=list)
    run_dirs: dict[str, Path] = field(default_factory=dict)
    stagers: dict[str, Stager] = field(default_factory=dict)  # run id -> its part's stager
    boxes: dict[str, str] = field(default_factory=dict)  # run id -> its box
    _part_stagers: list[Stager] = field(default_factory=list)

    def fold_into(self, stager: Stager) -> None:
        """The parts' staged files join the bundle's one listing."""
        for part_stager in self._part_stagers:
            stager.entries.update(part_stager.entries)
            stager.omitted.extend(part_stager.omitted)


def merge_parts(parts: tuple[Part, ...], stager: Stager) -> Merged:
    merged = Merged()
    for part in parts:
        if not part.merged:
            continue
        far = Path(part.far_root or part.state_dir)
        part_stager = Stager(stager.root, Scrubber(far), LogRedactor(far))
        merged._part_stagers.append(part_stager)
        ledger = part.state_dir / "ledger.jsonl"
        part_stager.copy(ledger, f"boxes/{part.slug}/ledger.jsonl", "ledger")
        events = run_events(read_ledger(ledger))
        merged.events += events
        for run in replay(events).runs:
            merged.run_dirs[run.id] = part.state_dir / "runs" / run.id
            merged.stagers[run.id] = part_stager
            merged.boxes[run.id] = part.box
    return merged


def merged_view(plan, parts: tuple[Part, ...] | None = None):
    """(state, run directories) of this box's runs and every merged part's, or None
    when no part was pulled here: the ending after a merge counts every box."""
    from .parts import RunDirectories, read_parts

    parts = read_parts(plan.state_dir) if parts is None else parts
    if not any(p.merged for p in parts):
        return None
    events = read_ledger(plan.state_dir / "ledger.jsonl")
    dirs: dict[str, Path] = {}
    for part in parts:
        if part.merged:
            part_events = run_events(read_ledger(part.state_dir / "ledger.jsonl"))
            events += part_events
            dirs |= {run.id: part.state_dir / "runs" / run.id
                     for run in replay(part_events).runs}
    return replay(events), RunDirectories(plan.state_dir / "runs", dirs)
