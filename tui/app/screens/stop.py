"""Stop a run by hand: confirm, with the reason that goes into the ledger.

A stopped run keeps its identifier and its reason (it still counts in the
budget), so the reason is asked for, with a sensible default.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Static

DEFAULT_REASON = "stopped by hand from the control room"


class StopScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="stop.cancel")]

    def __init__(self, run_id: str, grace_s: float, label: str | None = None):
        super().__init__(classes="modal")
        self.run_id = run_id
        self.label = label or run_id
        self.grace_s = grace_s

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(f"Stop {self.label}?", classes="dialog-title", markup=False)
            yield Static(f"It gets SIGTERM (time to checkpoint), then SIGKILL after "
                         f"{self.grace_s:g} s. It keeps its id ({self.run_id}) and reason; "
                         "its cost counts.",
                         classes="dialog-body", markup=False)
            yield Input(value=DEFAULT_REASON, placeholder="reason", id="stop-reason")
            yield Static("enter stop · esc cancel", classes="dialog-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip() or DEFAULT_REASON)

    def action_cancel(self) -> None:
        self.dismiss(None)
