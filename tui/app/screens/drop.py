"""Pick the variants to drop: space marks one, enter drops the marked (or the highlighted).

At the decision point, variants whose pilot a stop rule ended are marked
already, with the rule shown, and the cursor starts on the first optional
variant. Mandatory ones are listed too: picking one is refused by the engine
in its own words, so a person learns why instead of wondering where they went.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import SelectionList, Static
from textual.widgets.selection_list import Selection


@dataclass(frozen=True)
class DropChoice:
    variant: str
    category: str
    mark: str | None = None  # 'pilot stopped by non_finite nan': pre-marked for dropping

    @property
    def optional(self) -> bool:
        return self.category != "mandatory"


class DropScreen(ModalScreen[list[str] | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="drop.cancel"),
                Binding("enter", "confirm", "Drop", priority=True, id="drop.confirm")]

    def __init__(self, choices: list[DropChoice], title: str = "Drop a variant",
                 premark: bool = False):
        super().__init__(classes="modal")
        self.choices = choices
        self.title_text = title
        self.premark = premark

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Static(self.title_text, classes="dialog-title", markup=False)
            items = []
            for c in self.choices:
                note = "mandatory: the conclusion needs it" if not c.optional else c.category
                text = f"{c.variant}  ({note})" + (f"  ✕ {c.mark}" if c.mark else "")
                items.append(Selection(text, c.variant, bool(self.premark and c.mark
                                                             and c.optional)))
            yield SelectionList[str](*items, id="drop-options")
            yield Static("↑/↓ move · space mark · enter drop the marked (or this one) · "
                         "esc cancel", classes="dialog-keys", markup=False)

    def on_mount(self) -> None:
        options = self.query_one(SelectionList)
        options.focus()
        first = next((i for i, c in enumerate(self.choices) if c.optional), 0)
        if self.choices:
            options.highlighted = first

    @property
    def options(self) -> SelectionList:
        return self.query_one(SelectionList)

    def action_confirm(self) -> None:
        options = self.options
        picked = list(options.selected)
        if not picked and options.highlighted is not None and self.choices:
            picked = [self.choices[options.highlighted].variant]
        order = [c.variant for c in self.choices]
        self.dismiss(sorted(picked, key=order.index) or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
