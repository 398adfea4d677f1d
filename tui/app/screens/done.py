"""The end of the campaign on one screen: the verdict, the budget, the bundle and
how to fetch it, and whether the box can be released.

Shown by itself once the bundle is verified (phase `done`), and with `e`
later. Everything is wrapped, nothing cut: at 80x24 a person reads the
verdict with its reason and copies the retrieval command from here.
"""

from __future__ import annotations

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from ..ending_view import EndingView
from .run import facts_grid


def ending_table(view: EndingView) -> Table:
    return facts_grid(view.facts)


class DoneScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,e", "close", "Back to the room", id="done.close")]

    def __init__(self, view: EndingView):
        super().__init__(classes="modal run-screen")  # the whole screen, like a run's
        self.view = view

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide", id="done-dialog"):
            yield Static(self.view.title, classes="dialog-title", markup=False)
            yield Static(ending_table(self.view), id="done-facts")
            if self.view.command:
                yield Static("fetch it from your machine (<campaign-dir>: the folder of "
                             "campaign.toml on the box):", classes="dialog-body", markup=False)
                yield Static(self.view.command, id="done-command", markup=False)
            yield Static("esc back to the room · q there quits (runs are over)",
                         classes="dialog-keys", markup=False)

    def show(self, view: EndingView) -> None:
        """The window keeps counting down while the screen is open."""
        if view != self.view and self.is_mounted:
            self.view = view
            self.query_one("#done-facts", Static).update(ending_table(view))

    def text(self) -> str:
        """What the screen says, as plain text (tests)."""
        parts = [f"{label} {text}" for label, text in self.view.facts]
        return "\n".join([self.view.title, *parts, self.view.command or ""])

    def action_close(self) -> None:
        self.dismiss(None)
