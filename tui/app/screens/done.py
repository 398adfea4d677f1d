"""The end of the campaign on one screen: the verdict, the budget, the bundle and its
figures, how to fetch it, and whether the box can be released.

Shown by itself once the bundle is verified (phase `done`), and with `e`
later. The facts wrap and the screen scrolls (↑/↓, page keys), so nothing is
cut at 80x24. The fetch command is shown whole: on one line where it fits, else
broken between arguments with shell line continuations (` \\`), so the lines
selected and pasted together are still one command (a plain soft wrap would
paste as two); the wrap-up also writes it to `outputs/FETCH.txt`, which `cat`
shows whole. `y` copies it through Textual's clipboard support: an OSC 52
sequence that reaches the person's own terminal through ssh and tmux where
both let it (tmux only with `set -g set-clipboard on`), which the screen says
before the key is pressed, and again after.
"""

from __future__ import annotations

import os

from rich.table import Table
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ...campaign.retrieval import fetch_file, wrapped
from ..ending_view import EndingView
from .facts import facts_grid

COPY_KEYS = "y copy the command · ↑/↓ scroll · esc back to the room · q quits"


def ending_table(view: EndingView) -> Table:
    return facts_grid(view.facts)


def copied_text(environ=None) -> str:
    """What the screen says once `y` sent the command: the terminal may refuse it."""
    env = os.environ if environ is None else environ
    where = ("in tmux it needs `set -g set-clipboard on`; " if env.get("TMUX") else "")
    return ("sent to your terminal's clipboard (OSC 52): " + where + "if pasting gives "
            "nothing, your terminal does not accept it (macOS Terminal does not): select "
            "the lines above, they paste as one command")


def fetch_label(bundle_rel: str | None) -> str:
    """What the line above the command says: how to take it, and what `y` needs (said
    before the key is pressed: in a tmux without it, `y` silently does nothing)."""
    where = f"; on the box `cat {fetch_file(bundle_rel)}` shows it" if bundle_rel else ""
    return ("fetch it from your machine: y copies it (OSC 52; in tmux only with "
            f"`set -g set-clipboard on`){where}:")


# the command's columns: the whole width (it starts at the first column) but for a
# scroll bar
COMMAND_MARGIN = 2


class DoneScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,e", "close", "Back to the room", id="done.close"),
                Binding("y", "copy", "Copy the command", id="done.copy"),
                Binding("q", "quit_room", "Quit", id="done.quit")]

    def __init__(self, view: EndingView):
        super().__init__(classes="modal run-screen")  # the whole screen, like a run's
        self.view = view

    def compose(self) -> ComposeResult:
        # every part is composed whatever the first view holds: a view can gain its
        # command later (`show`, once the bundle is written), and a resize or `y`
        # then finds the widgets it updates
        with VerticalScroll(classes="dialog wide", id="done-dialog"):
            yield Static(self.view.title, id="done-title", classes="dialog-title",
                         markup=False)
            yield Static(ending_table(self.view), id="done-facts")
            yield Static("", classes="dialog-body", id="done-fetch", markup=False)
            yield Static("", id="done-command", markup=False)
            yield Static("", id="done-copied", markup=False)
            yield Static("", id="done-keys", classes="dialog-keys", markup=False)

    def on_mount(self) -> None:
        self._show_command()
        for dialog in self.query("#done-dialog"):
            dialog.focus()

    def _command_text(self) -> str:
        width = max(20, self.app.size.width - COMMAND_MARGIN)
        return wrapped(self.view.command or "", width)

    def _show_command(self) -> None:
        """The fetch lines as the current view has them: shown with a command, hidden
        without one (the keys line then does not offer `y`)."""
        has = bool(self.view.command)
        # each part as it is found: a screen mounted as the app closes (the ending
        # arriving at that moment) has lost its parts already, and that is no error
        for part in ("#done-fetch", "#done-command", "#done-copied"):
            for widget in self.query(part).results(Static):
                widget.display = has
        if has:
            for widget in self.query("#done-fetch").results(Static):
                widget.update(fetch_label(self.view.bundle))
            for widget in self.query("#done-command").results(Static):
                widget.update(self._command_text())
        for widget in self.query("#done-keys").results(Static):
            widget.update(COPY_KEYS if has else "↑/↓ scroll · esc back to the room · q quits")

    def on_resize(self) -> None:
        # a resize can arrive before the parts are composed: nothing to rewrap then
        if self.view.command:
            for command in self.query("#done-command").results(Static):
                command.update(self._command_text())

    def show(self, view: EndingView) -> None:
        """The window keeps counting down while the screen is open, and the bundle's
        fetch command appears once there is one."""
        if view != self.view and self.is_mounted:
            had = (self.view.command, self.view.bundle)
            self.view = view
            self.query_one("#done-title", Static).update(view.title)
            self.query_one("#done-facts", Static).update(ending_table(view))
            if (view.command, view.bundle) != had:
                self._show_command()

    def text(self) -> str:
        """What the screen says, as plain text (tests)."""
        parts = [f"{label} {text}" for label, text in self.view.facts]
        return "\n".join([self.view.title, *parts, self.view.command or ""])

    def action_copy(self) -> None:
        if not self.view.command:
            return
        self.app.copy_to_clipboard(self.view.command)
        if self.is_mounted:
            self.query_one("#done-copied", Static).update(copied_text())

    def action_close(self) -> None:
        self.dismiss(None)

    def action_quit_room(self) -> None:
        """q closes the room from the ending too, as the README says of q anywhere (the
        engine goes on, and `itera-tui` reopens on the ending)."""
        self.dismiss(None)
        self.app.keys.quit()
