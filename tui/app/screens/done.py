"""The end of the campaign on one screen: the verdict, the budget, the bundle and its
figures, how to fetch it, and whether the box can be released.

Shown by itself once the bundle is verified (phase `done`), and with `e`
later. The facts wrap and the screen scrolls (↑/↓, page keys), so nothing is
cut at 80x24. The fetch command stands on a line of its own that never
wraps (a wrapped command pasted from tmux is a broken command), scrolled
sideways when the pane is narrower than it, and `y` copies it through
Textual's clipboard support: an OSC 52 sequence that reaches the person's own
terminal through ssh and tmux, where the terminal accepts it (the screen says
what to do where it does not).
"""

from __future__ import annotations

import os

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import HorizontalScroll, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ..ending_view import EndingView
from .run import facts_grid

COPY_KEYS = "y copy the command · ↑/↓ scroll · esc back to the room · q there quits"


def ending_table(view: EndingView) -> Table:
    return facts_grid(view.facts)


def copied_text(environ=None) -> str:
    """What the screen says once `y` sent the command: the terminal may refuse it."""
    env = os.environ if environ is None else environ
    where = ("in tmux it needs `set -g set-clipboard on`; " if env.get("TMUX") else "")
    return ("sent to your terminal's clipboard (OSC 52): " + where + "if pasting gives "
            "nothing, your terminal does not accept it (macOS Terminal does not): select "
            "the line above, it is whole")


class DoneScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,e", "close", "Back to the room", id="done.close"),
                Binding("y", "copy", "Copy the command", id="done.copy")]

    def __init__(self, view: EndingView):
        super().__init__(classes="modal run-screen")  # the whole screen, like a run's
        self.view = view

    def compose(self) -> ComposeResult:
        with VerticalScroll(classes="dialog wide", id="done-dialog"):
            yield Static(self.view.title, classes="dialog-title", markup=False)
            yield Static(ending_table(self.view), id="done-facts")
            if self.view.command:
                yield Static("fetch it from your machine (y copies it):",
                             classes="dialog-body", id="done-fetch", markup=False)
                with HorizontalScroll(id="done-command-line"):
                    yield Static(self.view.command, id="done-command", markup=False)
                yield Static("", id="done-copied", markup=False)
            yield Static(COPY_KEYS if self.view.command else
                         "↑/↓ scroll · esc back to the room · q there quits",
                         classes="dialog-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#done-dialog").focus()

    def show(self, view: EndingView) -> None:
        """The window keeps counting down while the screen is open."""
        if view != self.view and self.is_mounted:
            self.view = view
            self.query_one("#done-facts", Static).update(ending_table(view))

    def text(self) -> str:
        """What the screen says, as plain text (tests)."""
        parts = [f"{label} {text}" for label, text in self.view.facts]
        return "\n".join([self.view.title, *parts, self.view.command or ""])

    def action_copy(self) -> None:
        if not self.view.command:
            return
        self.app.copy_to_clipboard(self.view.command)
        self.query_one("#done-copied", Static).update(copied_text())

    def action_close(self) -> None:
        self.dismiss(None)
