"""The screens that follow the campaign while open: the wrap-up, the ending, a run.

A plain object the App holds (no mixin). Each screen is fed from the
snapshots the App receives, so it shows what the room shows, live: the
wrap-up's progress and result, the ending (which opens by itself once, when
the bundle is verified), and the run screen's facts.
"""

from __future__ import annotations

from .messages import WrapupProgress
from . import screens


class Overlays:
    def __init__(self, app, session):
        self.app = app
        self.session = session
        self.wrapup_screen: "screens.WrapupScreen | None" = None
        self.done_screen: "screens.DoneScreen | None" = None
        self.run_screen: "screens.RunScreen | None" = None
        self.ending_shown = False

    def _open(self, screen) -> bool:
        return screen is not None and screen in self.app.screen_stack

    # -- following the snapshots ------------------------------------------------
    def follow(self, old, room) -> None:
        self._follow_wrapup(old, room)
        if self._open(self.run_screen):
            self.run_screen.show_room(room)
        if room.ending is None:
            return
        from .ending_view import ending_view  # once the runs are over: off the first paint

        if self._open(self.done_screen):
            self.done_screen.show(ending_view(self.app.plan, room.ending, room.phase))
        elif room.phase == "done" and not self.ending_shown:
            self.ending_shown = True
            self.show_ending()

    def _follow_wrapup(self, old, room) -> None:
        wrap = room.wrapup
        if wrap.ok is not None and (old is None or old.wrapup.ok is None):
            if self._open(self.wrapup_screen):
                self.wrapup_screen.finish(wrap.ok, wrap.text)
            self.app.notify(wrap.text or "", title="wrap-up", timeout=30,
                            severity="information" if wrap.ok else "error")
        if (self.app.auto_wrapup and room.engine.finished and room.state.wrapup is None
                and not wrap.attempted):
            self.start_wrapup()

    # -- opening them ------------------------------------------------------------------
    def start_wrapup(self) -> None:
        self.session.start_wrapup(lambda line: self.app.post_message(WrapupProgress(line)))
        self.app.pump.request(urgent=True)
        self.show_wrapup()

    def show_wrapup(self) -> None:
        if self._open(self.wrapup_screen):
            return
        wrap = self.session.wrapup_progress()
        self.wrapup_screen = screens.WrapupScreen(
            list(wrap.lines), None if wrap.ok is None else (wrap.ok, wrap.text))
        self.app.push_screen(self.wrapup_screen)

    def wrapup_line(self, text: str) -> None:
        if self._open(self.wrapup_screen):
            self.wrapup_screen.add(text)

    def show_ending(self) -> None:
        room = self.app.room
        if room is None or room.ending is None:
            self.app.notify("the runs are not over yet", severity="information")
            return
        if self._open(self.done_screen):
            return
        from .ending_view import ending_view

        self.done_screen = screens.DoneScreen(ending_view(self.app.plan, room.ending, room.phase))
        self.app.push_screen(self.done_screen)

    def open_run(self, run_id: str) -> None:
        self.run_screen = screens.RunScreen(self.app.plan, self.app.room, run_id)
        self.app.push_screen(self.run_screen)
