"""The runs table: state, progress, loss, best metric, checkpoint age, stop reason.

Drawn by hand rather than with DataTable: the columns adapt to the width (an
80-column tmux pane keeps id, state with the stop rule and value, progress,
loss and metric; a wide one adds the category name and the full stop reason),
and redrawing a few rows once a second stays cheap. The selection is the
app's: the table marks it and keeps it in view.
"""

from __future__ import annotations

from rich.text import Text

from ..format import bar, clip, count
from ..rows import CATEGORY_SHORT, RunRow
from .base import ModelPanel


class RunsTable(ModelPanel):
    COMPONENT_CLASSES = {"runs--header", "runs--selected", "runs--running", "runs--stopping",
                         "runs--completed", "runs--stopped", "runs--failed", "runs--queued",
                         "runs--dropped"}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.model = ((), None)  # (rows, selected key)

    def columns(self, width: int, rows) -> list[tuple[str, str, int]]:
        """(key, title, width) for this width; the stop reason takes what is left."""
        roomy = width >= 96
        id_w = min(max([len(r.label) for r in rows] + [6]), 22 if roomy else 13)
        cat_w = 11 if width >= 140 else 3
        cols = [("id", "run", id_w), ("cat", "category" if cat_w > 3 else "cat", cat_w),
                ("state", "state", 18 if roomy else 16),
                ("progress", "step/total · eta", 26 if roomy else 15),
                ("loss", "loss", 7 if roomy else 6), ("best", "best", 7 if roomy else 6),
                ("ckpt", "ckpt", 6 if roomy else 5)]
        used = sum(w for _, _, w in cols) + len(cols) + 2
        if not roomy:  # the state column already says rule and value: widen the progress
            cols[3] = ("progress", "step/total · eta", max(15, 15 + width - used - 1))
            return cols
        cols.append(("stop", "stop reason", max(0, width - used)))
        return cols

    def _cell(self, key: str, row: RunRow, width: int) -> str:
        if key == "id":
            return row.label
        if key == "cat":
            return row.category if width > 3 else CATEGORY_SHORT.get(row.category, row.category)
        if key == "state":
            return row.state_text
        if key == "progress":
            if row.step is None and row.total is None:
                return ""
            counts = f"{count(row.step or 0)}/{count(row.total) if row.total else '?'}"
            eta = f" {row.eta}" if row.eta else ""
            bar_w = max(0, width - len(counts) - len(eta) - 1)
            return f"{counts} {bar(row.fraction, bar_w)}{eta}" if bar_w >= 3 else counts + eta
        if key == "loss":
            return row.loss
        if key == "best":
            return row.best
        if key == "ckpt":
            return row.checkpoint
        return row.stop_text

    def render(self) -> Text:
        rows, selected = self.model
        width, height = self.size.width, max(1, self.size.height)
        cols = self.columns(width, rows)
        out = Text(no_wrap=True, overflow="crop")
        out.append("  " + " ".join(clip(t, w).ljust(w) for _, t, w in cols if w) + "\n",
                   self.style_of("runs--header"))
        index = next((i for i, r in enumerate(rows) if r.key == selected), 0)
        visible = max(1, height - 1)
        first = min(max(0, index - visible // 2), max(0, len(rows) - visible))
        for i, row in enumerate(rows[first:first + visible], start=first):
            style = self.style_of(f"runs--{row.state}")
            marker = "▶ " if row.key == selected else "  "
            line = Text(marker, style)
            line.append(" ".join(clip(self._cell(k, row, w), w).ljust(w)
                                 for k, _, w in cols if w), style)
            if row.key == selected:
                line.stylize(self.style_of("runs--selected"))
            out.append_text(line)
            if i < first + visible - 1 and i < len(rows) - 1:
                out.append("\n")
        return out
