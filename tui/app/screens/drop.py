"""Pick the variants to drop: space marks one, enter drops the marked (or the highlighted).

At the decision point, variants whose pilot a stop rule ended are marked
already, with the rule shown, and the cursor starts on the first optional
variant. A mark is written (`[x]`), not only coloured, so NO_COLOR and a
plain tmux capture read it too. Mandatory ones are listed as well: picking
one is refused by the engine in its own words, so a person learns why
instead of wondering where they went; after a refusal the picker opens again
with the engine's words on it, so the person picks again without starting over.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option


@dataclass(frozen=True)
class DropChoice:
    variant: str
    category: str
    mark: str | None = None  # 'pilot stopped by non_finite nan': suggested for dropping

    @property
    def optional(self) -> bool:
        return self.category != "mandatory"

    def prompt(self, marked: bool) -> Text:
        note = "mandatory: the conclusion needs it" if not self.optional else self.category
        box = "[x]" if marked else "[ ]"
        return Text(f"{box} {self.variant}  ({note})" + (f"  ✕ {self.mark}" if self.mark
                                                          else ""))


class DropScreen(ModalScreen[list[str] | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="drop.cancel"),
                Binding("space", "toggle", "Mark", id="drop.toggle"),
                Binding("enter", "confirm", "Drop", priority=True, id="drop.confirm")]

    def __init__(self, choices: list[DropChoice], title: str = "Drop a variant",
                 premark: bool = False, note: str | None = None):
        super().__init__(classes="modal")
        self.choices = choices
        self.title_text = title
        self.marked = {c.variant for c in choices if premark and c.mark and c.optional}
        self.note = note  # why the last pick was refused

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide"):
            yield Static(self.title_text, classes="dialog-title", markup=False)
            if self.note:
                yield Static(f"refused: {self.note}", id="drop-refused", markup=False)
            yield OptionList(*[Option(c.prompt(c.variant in self.marked), id=c.variant)
                               for c in self.choices], id="drop-options")
            yield Static("↑/↓ move · space mark · enter drop the marked (or this one) · "
                         "esc cancel", classes="dialog-keys", markup=False)

    def on_mount(self) -> None:
        options = self.options
        options.focus()
        if self.choices:
            options.highlighted = next((i for i, c in enumerate(self.choices) if c.optional), 0)

    @property
    def options(self) -> OptionList:
        return self.query_one(OptionList)

    def action_toggle(self) -> None:
        i = self.options.highlighted
        if i is None or not self.choices:
            return
        choice = self.choices[i]
        self.marked ^= {choice.variant}
        self.options.replace_option_prompt_at_index(i, choice.prompt(choice.variant
                                                                     in self.marked))

    def action_confirm(self) -> None:
        picked = [c.variant for c in self.choices if c.variant in self.marked]
        i = self.options.highlighted
        if not picked and i is not None and self.choices:
            picked = [self.choices[i].variant]
        self.dismiss(picked or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
