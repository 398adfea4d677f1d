"""Which columns the runs table shows at a width, and each cell's text.

A value is never cut: the table drops whole columns, lowest priority first,
instead. Always shown: the run's label, its state (with the stop rule and
value), step / total, the last loss and the decision metric's last value.
Then, as the width allows: the checkpoint age, the ETA, the category, the
best metric (labelled `best`), a progress bar and the full stop reason.
Column widths come from the rows themselves, so a long variant id widens its
column and pushes optional columns out rather than being clipped. Pure, and
tested without textual.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import format as fmt
from .rows import CATEGORY_SHORT, RunRow

GAP = 1
MARKER_W = 2  # '▶ ' before the selected row
NUMBER_MIN, NUMBER_MAX = 5, 7
BAR_MIN, BAR_MAX = 8, 24
STOP_MIN = 16
LABEL_MIN = 10


@dataclass(frozen=True)
class Column:
    """One column of the runs table, kept or dropped whole as the width allows."""
    key: str
    title: str
    width: int
    right: bool = False  # numbers align right


def _steps(row: RunRow) -> str:
    if row.state == "dropped" or row.total is None:  # a check has no step count to show
        return fmt.count(row.step) if row.step and row.state != "dropped" else ""
    done = fmt.count(row.step) if row.step is not None else "0"
    return f"{done}/{fmt.count(row.total) if row.total else '?'}"


def _widest(texts, floor: int = 0) -> int:
    return max([len(t) for t in texts] + [floor])


def columns(rows, width: int, metric: str) -> list[Column]:
    """The columns for this width, essentials first, optional ones while they fit."""
    rows = list(rows)
    label_w = _widest([r.label for r in rows], 3)
    state_w = _widest([r.state_text for r in rows], 5)
    steps_w = _widest([_steps(r) for r in rows], len("step/total"))
    loss_w = max(NUMBER_MIN - 1, fmt.number_width([r.loss for r in rows], 4, NUMBER_MAX))
    metric_w = max(min(len(metric), NUMBER_MAX + 3),
                   fmt.number_width([r.metric for r in rows], 4, NUMBER_MAX))
    room = width - MARKER_W
    essentials = [Column("label", "run", label_w), Column("state", "state", state_w),
                  Column("steps", "step/total", steps_w, True),
                  Column("loss", "loss", loss_w, True),
                  Column("metric", metric, metric_w, True)]
    essentials = _fit_essentials(essentials, room)
    used = sum(c.width for c in essentials) + GAP * (len(essentials) - 1)
    optional = [
        Column("ckpt", "ckpt", _widest([r.checkpoint for r in rows], 4)),
        Column("eta", "eta", _widest([r.eta for r in rows], 3)),
        Column("cat", "category" if width >= 150 else "cat",
               _widest([r.category for r in rows], 8) if width >= 150 else 3),
        Column("best", "best", fmt.number_width([r.best for r in rows], 4, NUMBER_MAX), True),
        Column("bar", "progress", BAR_MIN),
        Column("stop", "stop reason", STOP_MIN),
    ]
    if not any(r.eta for r in rows):
        optional = [c for c in optional if c.key != "eta"]
    if not any(r.stop_text for r in rows):
        optional = [c for c in optional if c.key != "stop"]
    chosen = []
    for col in optional:
        if used + GAP + col.width <= room:
            chosen.append(col)
            used += GAP + col.width
    spare = room - used
    out = essentials + chosen
    stop_need = _widest([r.stop_text for r in rows], STOP_MIN)
    for key, most in (("stop", stop_need), ("bar", BAR_MAX)):  # the flexible ones: the rest
        i = next((i for i, c in enumerate(out) if c.key == key), None)
        if i is not None and spare > 0:
            grow = min(spare, most - out[i].width)
            out[i] = Column(out[i].key, out[i].title, out[i].width + grow, out[i].right)
            spare -= grow
    return out


def _fit_essentials(cols: list[Column], room: int) -> list[Column]:
    """Too narrow for all five whole: numbers first take fewer digits, then the
    label is shortened in its middle (its kind suffix stays), then the state."""
    def total(cs):
        return sum(c.width for c in cs) + GAP * (len(cs) - 1)

    cols = list(cols)
    for i in (3, 4):
        over = total(cols) - room
        if over > 0:
            cols[i] = Column(cols[i].key, cols[i].title,
                             max(NUMBER_MIN, cols[i].width - over), True)
    for i, floor in ((0, LABEL_MIN), (1, 8)):
        over = total(cols) - room
        if over > 0:
            cols[i] = Column(cols[i].key, cols[i].title, max(floor, cols[i].width - over))
    return cols


def middle_clip(text: str, width: int) -> str:
    """'lora-rank…·pilot': keep the start and the end (the kind), drop the middle."""
    if len(text) <= width:
        return text
    if width <= 1:
        return text[:width]
    tail = min(len(text) // 3, max(1, (width - 1) // 2))
    head = width - 1 - tail
    return text[:head] + "…" + text[len(text) - tail:]


def cell(col: Column, row: RunRow) -> str:
    """The text of one cell, fitted to its column (numbers are reformatted, not cut)."""
    key, w = col.key, col.width
    if key == "label":
        text = middle_clip(row.label, w)
    elif key == "state":
        text = fmt.clip(row.state_text, w)
    elif key == "steps":
        text = _steps(row)
    elif key in ("loss", "metric", "best"):
        value = getattr(row, key)
        text = "" if value is None and row.run_id is None else fmt.number(value, w)
    elif key == "ckpt":
        text = row.checkpoint if row.run_id else ""
    elif key == "eta":
        text = row.eta
    elif key == "cat":
        text = row.category if w > 3 else CATEGORY_SHORT.get(row.category, row.category[:3])
    elif key == "bar":
        text = fmt.bar(row.fraction, w) if row.total and row.run_id else ""
    else:
        text = fmt.clip(row.stop_text, w)
    return text.rjust(w) if col.right else text.ljust(w)


def header(col: Column, above: int = 0, below: int = 0) -> str:
    """A column's title; the label's also says how many rows are out of view."""
    title = col.title
    if col.key == "label":
        title += (f" ↑{above}" if above else "") + (f" ↓{below}" if below else "")
    title = fmt.clip(title, col.width)
    return title.rjust(col.width) if col.right else title.ljust(col.width)
