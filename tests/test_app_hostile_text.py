"""No escape code a run controls reaches the terminal, on any screen of the control room.

A run controls its checkpoint paths, the problems its files have, its metric
names and values, its warnings and its output. Before: the run screen printed
an acknowledged checkpoint path raw (screen clear, colours, a right-to-left
override, an unterminated OSC 52 that writes the clipboard). Each screen is
drawn here over a campaign whose run says hostile things, and the drawn screen
(the screenshot's text, what reaches the terminal) holds no control or bidi
character: every string from a run passes `tui.campaign.text.for_terminal`.
"""

from __future__ import annotations

import unicodedata
from dataclasses import replace

import pytest

import test_app_support as support
from test_app_support import T0, run, settle, snapshot_room, wait_for
from tui.app.screens import (ConfirmScreen, DecisionScreen, DoneScreen, DropScreen,
                             HelpScreen, RunScreen, StopScreen, WrapupScreen)

pytestmark = pytest.mark.usefixtures("utc")

EVIL = "\x1b[2J\x1b[31mred\u202eevil\u200f\x9b6n\x1b]52;c;ZXZpbA=="  # OSC 52 unterminated
RID = "control-77aa88bb-1"
HOSTILE_EVENTS = [
    {"seq": 40, "t": T0 - 100, "event": "checkpoint_acknowledged", "run": RID,
     "path": f"checkpoints/{EVIL}.pt", "sha256": "ab", "bytes": 10, "write_s": 0.1,
     "block_s": 0.1, "step": 17000, "mode": "sync"},
    {"seq": 41, "t": T0 - 90, "event": "checkpoint_verified", "run": RID,
     "path": f"checkpoints/{EVIL}.pt", "ok": False, "problem": EVIL, "step": 17000},
    {"seq": 42, "t": T0 - 80, "event": "warning", "run": RID, "message": f"{RID}: {EVIL}"},
]


def leaked(app) -> list[str]:
    """Control and bidi characters on the drawn screen (a newline ends an SVG line)."""
    svg = app.export_screenshot()
    return sorted({repr(ch) for ch in svg if ch not in "\n" and (
        unicodedata.category(ch) == "Cc" or ch in "\u200e\u200f\u061c" or
        "\u202a" <= ch <= "\u202e" or "\u2066" <= ch <= "\u2069")})


EVENTS, LIVE = support.snapshot_events, support.snapshot_live


def hostile_room(tmp_path, monkeypatch, **kw):
    events, live = EVENTS, LIVE
    tmp_path.mkdir(parents=True, exist_ok=True)
    monkeypatch.setattr(support, "snapshot_events",
                        lambda decided: events(decided) + (HOSTILE_EVENTS if decided else []))

    def hostile_live(decided):
        views = live(decided)
        for rid, view in views.items():
            views[rid] = replace(view, last_values=view.last_values | {EVIL: 1.5, "note": EVIL},
                                 problems=(EVIL,))
        return views

    monkeypatch.setattr(support, "snapshot_live", hostile_live)
    app, engine, clock = snapshot_room(tmp_path, **kw)
    for name in ("stdout.log", "stderr.log"):
        with open(app.plan.state_dir / "runs" / RID / name, "a") as f:
            f.write(f"step 41 {EVIL}\n")
    return app


async def _walk(pilot, app, seen: dict) -> None:
    """Each screen the keys open, drawn, then closed."""
    seen["room"] = leaked(app)
    await pilot.press("enter")  # the control's full run is selected
    screen = await wait_for(pilot, lambda: isinstance(app.screen, RunScreen) and "step 41"
                            in app.screen.tail_text("stdout") and app.screen, what="run")
    await pilot.pause(0.2)
    seen["run"] = leaked(app)
    assert "checkpoints/" in "".join(support.screen_lines(app))
    screen.dismiss(None)
    for key, kind in (("question_mark", HelpScreen), ("d", DropScreen),
                      ("s", (ConfirmScreen, StopScreen)), ("w", ConfirmScreen)):
        await pilot.press(key)
        await wait_for(pilot, lambda: isinstance(app.screen, kind), what=key)
        await pilot.pause(0.1)
        seen[key] = leaked(app)
        app.screen.dismiss(None)
        await wait_for(pilot, lambda: not app.screen.is_modal, what=f"{key} closed")
    # the wrap-up's lines name the runs' files (a failure, a refusal)
    wrapup = WrapupScreen([f"FAIL runs/{RID}/{EVIL}: does not reload"], None)
    app.push_screen(wrapup)
    await wait_for(pilot, lambda: app.screen is wrapup, what="the wrap-up")
    wrapup.add(f"refused runs/{RID}/{EVIL}")
    wrapup.finish(False, f"bundle NOT verified: {EVIL}")
    await pilot.pause(0.2)
    seen["wrapup"] = leaked(app)
    assert "does not reload" in "".join(support.screen_lines(app))


def test_no_screen_prints_a_run_s_escape_codes(tmp_path, monkeypatch):
    app = hostile_room(tmp_path, monkeypatch, size=(120, 40))
    seen: dict = {}

    async def scenario():
        async with app.run_test(size=(120, 40)) as pilot:
            await settle(pilot, app)
            await _walk(pilot, app, seen)

    run(scenario())
    assert {k: v for k, v in seen.items() if v} == {}


def test_the_decision_and_the_ending_print_no_escape_codes(tmp_path, monkeypatch):
    seen: dict = {}
    decision = hostile_room(tmp_path / "decision", monkeypatch, decided=False,
                            size=(120, 40))

    async def deciding():
        async with decision.run_test(size=(120, 40)) as pilot:
            await settle(pilot, decision)
            await pilot.press("x")
            await wait_for(pilot, lambda: isinstance(decision.screen, DecisionScreen))
            await pilot.pause(0.1)
            seen["decision"] = leaked(decision)

    run(deciding())
    ending = hostile_room(tmp_path / "ending", monkeypatch, ending="yes", size=(120, 40))

    async def ended():
        async with ending.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: isinstance(ending.screen, DoneScreen),
                           what="the ending, by itself once the bundle is verified")
            await pilot.pause(0.1)
            seen["ending"] = leaked(ending)

    run(ended())
    assert {k: v for k, v in seen.items() if v} == {}
