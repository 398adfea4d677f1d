"""`z`: one panel on the whole screen, and back.

Done with classes, not a second screen: the panel keeps its model and keeps
redrawing from the snapshots; the CSS (`control_room.tcss`, `-zoom`) hides
the others and gives it the room. The footer stays, so `z` is still shown.
"""

from __future__ import annotations


class Zoom:
    def __init__(self, screen, panels, default):
        self.screen = screen
        self.panels = tuple(panels)
        self.default = default
        self.panel = None  # the zoomed panel, if any

    def toggle(self, focused) -> None:
        if self.panel is not None:
            self.panel.remove_class("zoomed")
            self.panel = None
        else:
            self.panel = focused if focused in self.panels else self.default
            self.panel.add_class("zoomed")
            self.panel.focus()
        self.screen.set_class(self.panel is not None, "-zoom")
        self.screen.set_class(self.panel is not None and self.panel.id == "timeline",
                              "-zoom-timeline")

    def covers(self, panel) -> bool:
        return self.panel is not None and self.panel is panel
