"""The other boxes' parts of a campaign over several boxes, merged into one bundle.

Each other box runs its share, builds and verifies its own part, and the first
box pulls it (tui.remote.pull) into `.itera/boxes/<box>/`: that box's ledger and
run directories as they are there, and its part bundle, checked after the copy.
The first box's wrap-up then builds ONE bundle from its own runs and every
merged part's, as if they had run here: the same copying, scrubbing (each part's
own campaign folder becomes `.`), hashing and verification, one manifest that
names the box of every run, one report, one budget over every lot, one verdict.
A part that could not be pulled is named with what is missing; the rest still
verifies.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..campaign.plan import THIS_BOX
from ..engine.ledger import events

# a part's events that say what happened to its runs; the campaign-level ones (its
# window, its engine, its own wrap-up) stay in its own ledger copy
# what another box's ledger adds to the merged state: its runs, their checkpoints and
# stops, and what it dropped (its campaign-wide events are the first box's to say)
RUN_EVENTS = (events.RunLaunchIntent, events.RunLaunched, events.RunSkipped, events.RunExited,
              events.RunReattached, events.RunKilled, events.RunTerminated,
              events.RunLaunchFailed, events.RunLaunchAbandoned, events.RunStopRequested,
              events.RunLeftovers, events.RunLeftoversKilled, events.CheckpointRequested,
              events.CheckpointAcknowledged, events.CheckpointVerificationStarted,
              events.CheckpointVerified, events.CheckpointRotated, events.StopRuleFired,
              events.VariantDropped)


@dataclass(frozen=True)
class Part:
    """One other box's share as the first box's wrap-up found it."""

    box: str
    lots: tuple[str, ...]
    variants: tuple[str, ...]  # its planned share
    state_dir: Path | None = None  # the pulled ledger.jsonl and runs/; None: not pulled
    far_root: str | None = None  # its campaign folder's absolute path there (scrubbed)
    missing: str | None = None  # why nothing (or not all) of it is merged
    part_verified: bool | None = None  # its own part bundle, checked after the pull
    part_failures: tuple[str, ...] = field(default=())

    @property
    def merged(self) -> bool:
        return self.state_dir is not None and self.missing is None

    @property
    def slug(self) -> str:
        return box_slug(self.box)

    def to_dict(self) -> dict:
        """As the merged manifest names it (no path of either box)."""
        return {"box": self.box, "lots": list(self.lots), "variants": list(self.variants),
                "missing": self.missing, "part_verified": self.part_verified,
                "part_failures": list(self.part_failures),
                "pulled": self.state_dir is not None}


def box_slug(box: str) -> str:
    """A folder name for a box (its host as written, made safe)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", box).strip("._") or "box"


def run_events(ledger: list[events.Event]) -> list[events.Event]:
    """The events of a part that the merged state replays."""
    return [ev for ev in ledger if isinstance(ev, RUN_EVENTS)]


class RunDirectories:
    """`runs_dir / run_id` for a bundle whose runs come from several boxes: this box's
    run directories, and each merged part's pulled ones."""

    def __init__(self, default: Path, elsewhere: dict[str, Path] | None = None):
        self.default = Path(default)
        self.elsewhere = dict(elsewhere or {})

    def __truediv__(self, run_id: str) -> Path:
        found = self.elsewhere.get(run_id)
        return found if found is not None else self.default / run_id


def boxes_section(plan, runs: list[dict], parts: tuple[Part, ...]) -> str:
    """The report's per-box part: what each box planned and ran, and what is missing."""
    from ..campaign.boxes import box_shares
    from ..campaign.units import human_duration, human_hours

    if not parts:
        return ""
    missing = {p.box: p for p in parts if not p.merged}
    lines = ["", "## Boxes", "",
             "| box | lots | planned | ran | planned | actual | state |",
             "|---|---|---|---|---|---|---|"]
    for share in box_shares(plan):
        mine = [r for r in runs if r.get("box", THIS_BOX) == share.box]
        planned_h = sum(plan.variant(v).hours for v in share.variants)
        actual_s = sum(r["duration_s"] or 0 for r in mine if r.get("duration_s"))
        ran = ", ".join(sorted({f"{r['variant']} ({r['kind']})" for r in mine})) or "nothing"
        part = missing.get(share.box)
        state = (f"missing: {part.missing}" if part else "merged" if share.remote else "here")
        lines.append(f"| {share.box} | {', '.join(share.lots)} | "
                     f"{', '.join(share.variants) or '-'} | {ran} | {human_hours(planned_h)} | "
                     f"{human_duration(actual_s) if mine else '-'} | {state} |")
    for part in parts:
        if not part.merged:
            lines += ["", f"**{part.box} is missing from this bundle** ({part.missing}): "
                          f"its share ({', '.join(part.variants) or 'no variant'}) is not in "
                          "the runs above; the verdict counts only what is here."]
        elif part.part_verified is False:
            lines += ["", f"{part.box}'s own part bundle did not verify after the pull: "
                          + "; ".join(part.part_failures[:3])]
        elif part.part_verified is None:
            lines += ["", f"{part.box} built no part bundle of its own (its engine ended "
                          "before its wrap-up): its runs are merged from its ledger and run "
                          "directories as pulled."]
    return "\n".join(lines) + "\n"


PART_RECORD = "part.json"  # in .itera/boxes/<box>/, beside the pulled state/ and bundle/


def write_part_record(folder: Path, part: Part) -> None:
    """What the pull found, for a later wrap-up or ending on this box."""
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (PART_RECORD + ".tmp")
    tmp.write_text(json.dumps(part.to_dict() | {"far_root": part.far_root}, indent=2) + "\n")
    tmp.replace(folder / PART_RECORD)


def read_parts(state_dir: Path) -> tuple[Part, ...]:
    """The parts pulled into this box's `.itera/boxes/` (a damaged record is skipped)."""
    out = []
    for record in sorted(Path(state_dir).glob(f"boxes/*/{PART_RECORD}")):
        try:
            d = json.loads(record.read_text())
            out.append(Part(str(d["box"]), tuple(map(str, d["lots"])),
                            tuple(map(str, d["variants"])),
                            record.parent / "state" if d.get("pulled") else None,
                            d.get("far_root"), d.get("missing"), d.get("part_verified"),
                            tuple(map(str, d.get("part_failures") or ()))))
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return tuple(out)
