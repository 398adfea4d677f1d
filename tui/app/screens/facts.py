"""Facts as two columns, the run screen's and the ending's: one home for both.

Its own module so the ending, which opens by itself on a finished campaign's first
frame, does not load the run screen (its detail model and tail reader) to draw them.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from ...campaign.text import for_terminal


def facts_grid(facts) -> Table:
    """(label, text) pairs as two columns: the run screen's facts and the ending's. A
    fact holds what a run controls (a checkpoint path, a problem, its command), so each
    passes the terminal cleaner here, where it is drawn."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True, width=7)
    table.add_column(overflow="fold")
    for label, text in facts:
        table.add_row(for_terminal(label), Text(for_terminal(text)))
    return table
