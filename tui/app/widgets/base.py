"""A panel that keeps its last model and refreshes only when the model changed.

Days of uptime at one refresh a second: drawing costs CPU only when what is
shown actually differs, so every panel compares models before refreshing.
"""

from __future__ import annotations

from rich.style import Style
from textual.widget import Widget


class ModelPanel(Widget):
    """`show(model)` stores a model; `render()` of the subclass draws it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.model = None

    def show(self, model) -> bool:
        if model == self.model:
            return False
        old, self.model = self.model, model
        self.refresh(layout=self._needs_layout(old, model))
        return True

    def _needs_layout(self, old, new) -> bool:
        """True when the panel's height depends on what changed (a full relayout)."""
        return False

    def style_of(self, name: str) -> Style:
        """A component class's rich style (colours come from the .tcss files)."""
        return self.get_component_rich_style(name, partial=True)

    def plain(self) -> str:
        """The panel's text, for tests and accessibility."""
        return self.render().plain
