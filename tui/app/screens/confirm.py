"""A yes/no question before anything that cannot be undone (drop, wrap up)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static


class ConfirmScreen(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("enter", "answer(True)", "Yes", show=False, id="confirm.enter"),
        Binding("n", "answer(False)", "No", id="confirm.no"),
        Binding("escape", "answer(False)", "Cancel", show=False, id="confirm.cancel"),
    ]

    def __init__(self, title: str, body: str, yes: str = "yes"):
        super().__init__(classes="modal")
        self.title_text = title
        self.body = body
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.title_text, classes="dialog-title")
            yield Static(self.body, classes="dialog-body")
            yield Static(f"[y] {self.yes}    [n] cancel", classes="dialog-keys", markup=False)

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)
