"""Wrap-up progress: what the bundle builder says, step by step, and how it ended.

The wrap-up runs in a worker; this screen only shows its messages. Closing it
while it runs hides the progress (the header keeps saying the wrap-up is
running); once it ended, the keys say so: closing it only closes it.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import RichLog, Static

from ...campaign.text import for_terminal


class WrapupScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape", "close", "Hide", id="wrapup.hide")]

    def __init__(self, lines: list[str] | None = None, status: tuple | None = None):
        """`lines`: progress so far; `status`: (ok, text) once the wrap-up ended."""
        super().__init__(classes="modal")
        self.lines: list[str] = list(lines or [])
        self.ok = None if status is None else status[0]
        self.status = "wrap-up running…" if status is None else status[1]

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Static("Wrap-up", classes="dialog-title")
            yield RichLog(id="wrapup-log", max_lines=200, wrap=True, markup=False)
            yield Static(for_terminal(self.status), id="wrapup-status", markup=False)
            yield Static(self.keys_text(), id="wrapup-keys", classes="dialog-keys",
                         markup=False)

    def keys_text(self) -> str:
        return "esc hide (the wrap-up goes on)" if self.ok is None else "esc close"

    def add(self, message: str) -> None:
        if self.is_mounted:
            self.query_one(RichLog).write(for_terminal(message))

    def on_mount(self) -> None:
        log = self.query_one(RichLog)
        for line in self.lines:  # the bundle's lines name the runs' files: cleaned
            log.write(for_terminal(line))
        if self.ok is not None:
            self.finish(self.ok, self.status)

    def finish(self, ok: bool, text: str) -> None:
        self.ok, self.status = ok, text
        if self.is_mounted:
            status = self.query_one("#wrapup-status", Static)
            status.update(for_terminal(text))
            status.set_class(ok, "ok")
            status.set_class(not ok, "failed")
            self.query_one("#wrapup-keys", Static).update(self.keys_text())

    def action_close(self) -> None:
        self.dismiss(None)
