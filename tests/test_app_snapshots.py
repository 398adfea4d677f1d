"""Screenshots of the control room on a fixed state (pytest-textual-snapshot).

Deterministic by construction: a FrozenEngine replays a ledger this test writes,
live views and GPU figures are fixed, the clock is fixed at T0, the time zone is
UTC, and the engine's estimator is pinned to one projected end (it may evolve
without moving these pictures; the session's projection around it is the real one). Update with `pytest --snapshot-update` after a wanted
visual change, and look at the SVGs before committing them.
"""

from __future__ import annotations

import json
import time

import pytest

from test_app_support import settle, snapshot_room, wait_for
from tui.app.screens import DecisionScreen, DoneScreen, HelpScreen, RunScreen
from tui.engine import estimate
from tui.engine.estimate import Projection as EstimatorProjection

PROJECTED_END = 1_764_500_000.0 + 15 * 3600  # T0 + 15 h: 31 h of slack in the window


@pytest.fixture(autouse=True)
def fixed_world(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    # pin the engine's estimator, not the session: CampaignSession.projection (its call,
    # its handling, the Projection it builds) runs as in the room
    pinned = EstimatorProjection(None, None, PROJECTED_END, PROJECTED_END, {})
    monkeypatch.setattr(estimate, "project", lambda *a, **k: pinned)
    yield
    monkeypatch.undo()
    time.tzset()


def _ready(app, modal: bool = False):
    async def run_before(pilot):
        await settle(pilot, app)
        if modal:
            await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen)
                           and app.screen.query("#pilot-figures"))
        await pilot.pause(0.2)
    return run_before


def test_main_screen_80x24(snap_compare, tmp_path):
    app, _, _ = snapshot_room(tmp_path)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_ready(app))


def test_main_screen_160x48(snap_compare, tmp_path):
    app, _, _ = snapshot_room(tmp_path)
    assert snap_compare(app, terminal_size=(160, 48), run_before=_ready(app))


def test_decision_modal_80x24(snap_compare, tmp_path):
    app, _, _ = snapshot_room(tmp_path, decided=False)
    assert snap_compare(app, terminal_size=(80, 24), run_before=_ready(app, modal=True))


def test_run_screen_80x24(snap_compare, tmp_path):
    app, _, _ = snapshot_room(tmp_path)

    async def run_before(pilot):
        await settle(pilot, app)
        await pilot.press("up", "enter")  # lora64·pilot: a rule stopped it
        await wait_for(pilot, lambda: isinstance(app.screen, RunScreen)
                       and "step 40" in app.screen.tail_text("stdout"))
        await pilot.pause(0.2)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_done_screen_80x24(snap_compare, tmp_path, known_box):
    app, _, _ = snapshot_room(tmp_path, ending="inconclusive")

    async def run_before(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen))
        await pilot.pause(0.3)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_main_screen_done_80x24(snap_compare, tmp_path):
    app, _, _ = snapshot_room(tmp_path, ending="yes")

    async def run_before(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen))
        await pilot.press("escape")
        await pilot.pause(0.3)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


# -- nothing out of reach at 80x24 (issue 24) ------------------------------------------------

BOX = dict(user="alice", host="203.0.113.7", port=None, folder="/srv/nli")


@pytest.fixture
def known_box(monkeypatch):
    """The fetch command's origin, fixed: who and where the person's ssh came in."""
    from tui.app.ending_view import Origin

    monkeypatch.setattr(Origin, "here", classmethod(lambda cls, plan, environ=None:
                                                    cls(**BOX)))


def _bundle_with_figures(tmp_path):
    bundle = tmp_path / "outputs" / "bundle"
    bundle.mkdir(parents=True, exist_ok=True)
    (bundle / "manifest.json").write_text(json.dumps({"figures": {
        "files": ["loss_curves.png", "loss_curves.svg", "quality.png", "quality.svg",
                  "figures.json"], "problem": None}}))


def test_help_scrolled_to_its_end_80x24(snap_compare, tmp_path):
    app, _, _ = snapshot_room(tmp_path)

    async def run_before(pilot):
        await settle(pilot, app)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("end")
        await pilot.pause(0.3)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_ending_with_the_fetch_command_whole_80x24(snap_compare, tmp_path, known_box):
    _bundle_with_figures(tmp_path)
    app, _, _ = snapshot_room(tmp_path, ending="yes")

    async def run_before(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen))
        await pilot.pause(0.3)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_header_with_a_long_reason_80x24(snap_compare, tmp_path, known_box):
    app, _, _ = snapshot_room(tmp_path, ending="inconclusive")

    async def run_before(pilot):
        await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen))
        await pilot.press("escape")
        await pilot.pause(0.3)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_events_log_with_a_notice_80x24(snap_compare, tmp_path):
    app, _, _ = snapshot_room(tmp_path)

    async def run_before(pilot):
        await settle(pilot, app)
        app.notify("lora64·pilot: threshold = 0.41 — val_acc=0.41 below 0.5 at step 320 "
                   "(bound from step 300)", title="stop rule fired", severity="error",
                   timeout=600)
        await pilot.pause(0.3)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
