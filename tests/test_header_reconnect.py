"""The header after `r` (a reconnect): "✓ bundle verified · None" no more (issue 36,
item 10). The first snapshot after a reconnect is replayed from the ledger alone,
with no ending yet: the header keeps the countdown and the wrap-up's state until
the next snapshot brings the verdict, which it then shows whole."""

from __future__ import annotations

from dataclasses import replace

from test_app_models import plan_of, room_at
from test_app_support import run
from tui.app.room import header_model
from tui.app.widgets.header import RoomHeader


def _header_text(model) -> str:
    from textual.app import App

    class One(App):
        def compose(self):
            self.header = RoomHeader()
            yield self.header

    out = {}

    async def scenario():
        app = One()
        async with app.run_test(size=(100, 6)) as pilot:
            app.header.model = model
            app.header.refresh()
            await pilot.pause()
            out["text"] = app.header.render().plain

    run(scenario())
    return out["text"]


def test_a_done_campaign_s_header_without_its_ending_yet_says_no_none(tmp_path):
    plan = plan_of(tmp_path)
    room = room_at(plan, None)
    room = replace(room, engine=replace(room.engine, phase="done"))
    assert room.ending is None  # what `replayed()` hands over after a reconnect
    model = header_model(plan, room)
    assert not model.done
    text = _header_text(model)
    assert "None" not in text, text
