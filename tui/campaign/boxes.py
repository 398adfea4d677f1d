"""Which box runs what: a campaign of lots on several hosts, split into shares.

A lot is one rental, so lots with different `host`s are different boxes, each with
its own engine that drives only its share. The share is fixed before anything
runs, from the calendar's placement (the one `check` prints): a variant runs, with
its pilot, on the lot the calendar places its full run on. The engines never ask
each other where to launch, so a lost link can never make a run start twice. The
plan's machine steps (data check, resume check, post steps) run on this box, the
one itera-tui is started on; each other box's corpus is checked by its hashes when
the campaign folder is copied there.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .calendar import Calendar, build_calendar
from .plan import THIS_BOX, Plan


@dataclass(frozen=True)
class BoxShare:
    """One box and what it runs: its lots, its variants, whether the steps run there."""

    box: str  # "this box" or the host as the user wrote it
    host: Any  # campaign.destination.Destination, None for this box
    dir: str | None  # the campaign folder there
    lots: tuple[str, ...]
    gpus: tuple[str, ...]  # the GPU model of each lot, in lot order
    variants: tuple[str, ...]  # variants (pilot and full run) placed on its lots
    runs_steps: bool  # the plan's machine steps run on this box
    python: str | None = None  # the interpreter there (`[[lot]] python`); None: python3

    @property
    def far_python(self) -> str:
        """How a shell on that box names its interpreter (`~/` left to the far shell)."""
        import shlex

        if not self.python:
            return "python3"
        if self.python.startswith("~/"):
            return '"$HOME"/' + shlex.quote(self.python[2:])
        return shlex.quote(self.python)

    @property
    def remote(self) -> bool:
        return self.host is not None

    def to_dict(self) -> dict:
        return {"box": self.box, "host": self.box if self.remote else None, "dir": self.dir,
                "lots": list(self.lots), "gpus": list(self.gpus),
                "variants": list(self.variants), "steps": self.runs_steps}


LOT_FILE = "lot"  # in another box's .itera/: the lot whose share this folder runs


def recorded_lot(state_dir: Path) -> str | None:
    """The lot the first box gave this folder when it started it there (None: this
    folder is the first box's, or a one-box campaign's)."""
    try:
        text = (Path(state_dir) / LOT_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def is_multi_box(plan: Plan) -> bool:
    return any(lot.host is not None for lot in plan.lots)


def home_lot(plan: Plan) -> str:
    """The first lot of this box: where a GPU-less variant is counted."""
    for lot in plan.lots:
        if lot.host is None:
            return lot.id
    return plan.lots[0].id


def variant_lots(plan: Plan, calendar: Calendar | None = None) -> dict[str, str]:
    """Variant id -> the lot its pilot and full run run on (the calendar's placement)."""
    cal = calendar or build_calendar(plan)
    home = home_lot(plan)
    placed = {e.id: e.lot for e in cal.entries if e.task.kind == "run"}
    return {v.id: placed.get(v.id) or home for v in plan.variants}


def box_shares(plan: Plan, calendar: Calendar | None = None) -> tuple[BoxShare, ...]:
    """Every box of the plan, this box first, with its share."""
    where = variant_lots(plan, calendar)
    order: list[str] = []
    lots_of: dict[str, list] = {}
    for lot in plan.lots:
        if lot.box not in lots_of:
            order.append(lot.box)
            lots_of[lot.box] = []
        lots_of[lot.box].append(lot)
    order.sort(key=lambda box: box != THIS_BOX)
    out = []
    for box in order:
        lots = lots_of[box]
        ids = tuple(lot.id for lot in lots)
        out.append(BoxShare(box=box, host=lots[0].host, dir=lots[0].dir, lots=ids,
                            gpus=tuple(lot.gpu for lot in lots),
                            variants=tuple(v for v, lot in where.items() if lot in ids),
                            runs_steps=box == THIS_BOX,
                            python=next((lot.python for lot in lots if lot.python), None)))
    return tuple(out)


def share_of_lot(plan: Plan, lot_id: str | None,
                 calendar: Calendar | None = None) -> BoxShare:
    """The share an engine drives: the box of `lot_id`, or this box when None.

    Raises KeyError naming the lot when the plan has no such lot."""
    shares = box_shares(plan, calendar)
    if lot_id is None:
        return shares[0]
    for share in shares:
        if lot_id in share.lots:
            return share
    raise KeyError(lot_id)


def share_warnings(plan: Plan, calendar: Calendar | None = None) -> list[str]:
    """What `check` says about the split: GPU models that do not compare, and a
    variant that waits for one on another box (no box waits for another)."""
    where = variant_lots(plan, calendar)
    lots = {lot.id: lot for lot in plan.lots}
    control = plan.campaign.control
    out = []
    if control in where:
        base = lots[where[control]]
        for v in plan.variants:
            lot = lots[where[v.id]]
            if v.id != control and lot.gpu != base.gpu:
                out.append(f"variant {v.id} runs on a {lot.gpu} (lot {lot.id}, {lot.box}), "
                           f"the control {control} on a {base.gpu} (lot {base.id}, "
                           f"{base.box}): their timings do not compare")
    if is_multi_box(plan):
        for v in plan.variants:
            for dep in v.after:
                if dep in where and lots[where[dep]].box != lots[where[v.id]].box:
                    out.append(f"variant {v.id} runs after {dep}, which runs on "
                               f"{lots[where[dep]].box}, not {lots[where[v.id]].box}: each "
                               f"box drives its own share, so {v.id} will not wait for it")
    return out


def render_boxes(summary: dict) -> list[str]:
    """`check`'s lines on the split: each box's lots and variants, then the warnings."""
    out = []
    boxes = summary.get("boxes") or []
    if len(boxes) > 1:
        for b in boxes:
            where = f"{b['box']}:{b['dir']}" if b["dir"] else b["box"]
            steps = "; the steps" if b["steps"] else ""
            runs = ", ".join(b["variants"]) or "no variant"
            out.append(f"box {where} (lots {', '.join(b['lots'])}, {', '.join(b['gpus'])}): "
                       f"runs {runs}{steps}")
    out += [f"warning (boxes): {w}" for w in summary.get("box_warnings") or ()]
    return out
