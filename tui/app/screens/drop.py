"""Pick a variant to drop. Mandatory ones are listed too, and refused by the engine
with its reason, so a person learns why instead of wondering where they went."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


class DropScreen(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="drop.cancel")]

    def __init__(self, variants: list[tuple[str, str]], title: str = "Drop a variant"):
        """`variants`: (id, category) of the variants not dropped yet."""
        super().__init__(classes="modal")
        self.variants = variants
        self.title_text = title

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.title_text, classes="dialog-title")
            options = []
            for vid, category in self.variants:
                note = "  (mandatory: cannot be dropped)" if category == "mandatory" \
                    else f"  ({category})"
                options.append(Option(f"{vid}{note}", id=vid))
            yield OptionList(*options, id="drop-options")
            yield Static("↑/↓ choose · enter drop · esc cancel", classes="dialog-keys",
                         markup=False)

    def on_mount(self) -> None:
        self.query_one(OptionList).focus()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)
