"""The runs table: label, state, step / total, loss, the decision metric, and more.

Drawn by hand rather than with DataTable: the columns come from
`runs_layout.columns` (values are never cut; whole columns drop by priority
as the width shrinks), and redrawing a few rows once a second stays cheap.
The selection is the app's: the table marks it and keeps it in view.
"""

from __future__ import annotations

from rich.text import Text

from ...engine.ledger.state import RunStatus

from ..runs_layout import MARKER_W, cell, columns, header
from .base import ModelPanel


class RunsTable(ModelPanel):
    can_focus = True
    # a style for every state a row can show: each run state the ledger replays to
    # (`cut` after a box went away included), and the two only a row has
    COMPONENT_CLASSES = {"runs--header", "runs--selected",
                         *(f"runs--{state}" for state in (*RunStatus, "stopping", "queued"))}

    def __init__(self, *args, metric: str = "metric", **kwargs):
        super().__init__(*args, **kwargs)
        self.metric = metric
        self.model = ((), None)  # (rows, selected key)

    def columns(self, width: int, rows) -> list:
        return columns(rows, width, self.metric)

    def render(self) -> Text:
        rows, selected = self.model
        width, height = self.size.width, max(1, self.size.height)
        cols = self.columns(width, rows)
        out = Text(no_wrap=True, overflow="crop")
        index = next((i for i, r in enumerate(rows) if r.key == selected), 0)
        visible = max(1, height - 1)
        first = min(max(0, index - visible // 2), max(0, len(rows) - visible))
        above, below = first, max(0, len(rows) - first - visible)
        out.append(" " * MARKER_W + " ".join(header(c, above, below) for c in cols) + "\n",
                   self.style_of("runs--header"))
        for i, row in enumerate(rows[first:first + visible], start=first):
            style = self.style_of(f"runs--{row.state}")
            marker = "▶ " if row.key == selected else "  "
            line = Text(marker, style)
            line.append(" ".join(cell(c, row) for c in cols), style)
            if row.key == selected:
                line.stylize(self.style_of("runs--selected"))
            out.append_text(line)
            if i < first + visible - 1 and i < len(rows) - 1:
                out.append("\n")
        return out
