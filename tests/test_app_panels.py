"""What each panel shows, on a fixed campaign state (a ledger the test writes).

No processes here: a FrozenEngine replays the ledger, a fake NVML and fixed host
figures feed the GPU panel, and the clock is fixed, so these are fast and exact.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console
from rich.segment import Segment

from fake_pynvml import LIBRARY_NOT_FOUND, FakeGpu
from test_app_support import (LONG_IDS, line_with, run, screen_lines, settle, shown,
                              snapshot_room, wait_for)
from tui.engine.decision.answer import CONTINUE
from tui.engine.ledger.events import DecidedBy
from tui.app.screens import DecisionScreen


pytestmark = pytest.mark.usefixtures("utc")  # local times print as UTC


def test_main_screen_at_80x24_shows_every_panel_inside_the_pane(tmp_path):
    app, engine, clock = snapshot_room(tmp_path)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            header = app.header_panel.plain()
            assert "nli-adapters" in header
            assert "1 d 22 h left" in header  # 72 h window started 26 h ago
            assert "08:53 UTC" in header and "slack" in header and "ok" in header
            assert "decided: continue" in header
            runs = app.runs_panel.plain()
            assert "▶ control·run" in runs  # the live run is selected
            timeline = app.timeline_panel.plain().splitlines()
            assert [line.split()[0] for line in timeline[:5]] == [
                "lot1:0", "actual", "lot1:1", "actual", "off"]  # lanes as `lot:index`
            assert "▲" in timeline[-1]
            assert app.timeline_panel.region.height == len(timeline) == 6  # 2 lanes x 2 + 2
            for panel in (app.header_panel, app.timeline_panel, app.runs_panel, app.gpu_panel,
                          app.chart_panel, app.events_panel):
                r = panel.region
                assert r.width > 0 and r.height > 0, panel
                assert r.right <= 80 and r.bottom <= 23, panel  # the footer keeps the last row
            assert app.runs_panel.region.height >= 6  # header + 5 runs at 80x24

    run(scenario())


def _whole_at_80x24(lines, names=None):
    """The values a person must read, whole on the drawn screen (not only in a model)."""
    n = names or {}
    control, lora16, lora64 = (n.get(k, k) for k in ("control", "lora16", "lora64"))
    # run labels tell a pilot from a full run; loss and the decision metric's LAST value
    line_with(lines, f"{control}·run", "running", "17.2k/20k", "0.5827", "0.861")
    line_with(lines, f"{lora16}·run", "running", "15.1k/20k", "0.6269", "0.874")
    line_with(lines, f"{lora64}·pilot", "✕ thresh 0.41", "320/500", "1.929", "0.41")
    line_with(lines, f"{lora64}·run", "queued", "0/20k")
    line_with(lines, "1 d 22 h left")  # the countdown, in human units
    assert not any("0.866" in line for line in lines[9:15])  # the best is not the figure


def test_the_values_a_person_reads_are_whole_at_80x24(tmp_path):
    app, engine, clock = snapshot_room(tmp_path)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            lines = screen_lines(app)
            assert len(lines) <= 24 and all(len(line) <= 80 for line in lines)
            _whole_at_80x24(lines)
            line_with(lines, "control·run", "24 min✓")  # ckpt age fits beside them
            line_with(lines, "run", "state", "step/total", "loss", "val_acc")  # the titles
            line_with(lines, "(▒plan █ran ░human ┊now ┃end)")  # the timeline's legend
            line_with(lines, "0", "97%", "70.5/180G", "71°", "812W")  # the GPU line whole
            line_with(lines, "↳ control·run")

    run(scenario())


def test_long_variant_ids_stay_whole_at_80x24_and_optional_columns_give_way(tmp_path):
    app, engine, clock = snapshot_room(tmp_path, names=LONG_IDS)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            lines = screen_lines(app)
            _whole_at_80x24(lines, LONG_IDS)
            assert not any("24 min" in line for line in lines)  # ckpt column dropped whole
            assert not any("…" in line for line in lines[9:15])  # no cell of the table cut
            await pilot.press("z")  # the runs table zoomed: every row, data_check included
            lines = await shown(pilot, app, "data_check", "✓ done")
            line_with(lines, "data_check", "✓ done")
            line_with(lines, f"{LONG_IDS['control']}·pilot", "0.839")
            await pilot.press("enter")  # and the run screen has what the table left out
            await wait_for(pilot, lambda: "24 min ago" in "\n".join(screen_lines(app)),
                           what="the run screen")

    run(scenario())


def test_large_terminal_uses_the_room(tmp_path):
    app, engine, clock = snapshot_room(tmp_path)

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot, app)
            gpus, chart = app.gpu_panel.region, app.chart_panel.region
            assert gpus.y == chart.y and gpus.right <= chart.x  # side by side
            assert chart.height >= 14 and chart.width >= 100
            assert app.runs_panel.region.height >= 9
            runs = app.runs_panel.plain()
            assert "control·run" in runs and "lora64·pilot" in runs  # labels, whole
            assert "threshold: val_acc=0.41 below 0.5" in runs  # full stop reason
            for title in ("ckpt", "eta", "category", "best", "progress", "stop reason"):
                assert title in runs.splitlines()[0]  # a wide pane shows every column
            assert "NVIDIA B200" in app.gpu_panel.plain()

    run(scenario())


def test_gpu_panel_shows_runs_na_and_a_lost_gpu(tmp_path):
    gpus = [FakeGpu(util=55, compute_pids=[4242001], unsupported={"power", "temp"}),
            FakeGpu(lost=True)]
    app, engine, clock = snapshot_room(tmp_path, gpus=gpus)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            text = app.gpu_panel.plain()
            assert "55%" in text and "N/A" in text
            assert "control·run" in text  # the run holding GPU 0, as the table names it
            assert "LOST" in text
            await wait_for(pilot, lambda: "GPU 1 is lost" in app.events_panel.plain())

    run(scenario())


def test_without_a_driver_the_panel_says_so_and_shows_the_host(tmp_path):
    app, engine, clock = snapshot_room(tmp_path, gpus=[], driver_error=LIBRARY_NOT_FOUND)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            text = app.gpu_panel.plain()
            assert "no NVIDIA driver" in text
            assert "CPU 12%" in text and "RAM 10.0G/64.0G" in text and "free state 120G" in text

    run(scenario())


def test_idle_gpu_for_ten_minutes_while_a_run_is_alive_is_a_warning(tmp_path):
    gpus = [FakeGpu(util=0), FakeGpu(util=90)]
    app, engine, clock = snapshot_room(tmp_path, gpus=gpus)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            assert "idle" not in app.events_panel.plain()
            clock.advance(601)
            await wait_for(pilot, lambda: "GPU 0 idle for 10 min while control·run is "
                           "alive" in app.events_panel.plain(), what="the idle warning")
            assert "GPU 1 idle" not in app.events_panel.plain()

    run(scenario())


def test_events_log_shows_stops_decisions_checkpoints_and_warnings(tmp_path):
    app, engine, clock = snapshot_room(tmp_path)

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot, app)
            text = app.events_panel.plain()
            assert "STOP lora64·pilot: threshold" in text  # runs named as in the table
            assert "decision: continue (by a person: the room or `itera-tui decide`)" in text
            assert "checkpoint of control·run verified" in text
            assert "warning: lora16 logged no record for 4 min" in text

    run(scenario())


def test_chart_follows_the_selection_and_can_show_all_runs(tmp_path):
    app, engine, clock = snapshot_room(tmp_path)

    async def scenario():
        async with app.run_test(size=(160, 48)) as pilot:
            await settle(pilot, app)
            assert app.chart_panel.plain().startswith("loss · control·run")
            await pilot.press("down")
            assert app.chart_panel.plain().startswith("loss · lora16·run")
            await pilot.press("a")
            title = app.chart_panel.plain().splitlines()[0]
            assert title.startswith("loss · all runs") and "■control·pilot" in title
            await pilot.press("a", "m")
            title = app.chart_panel.plain().splitlines()[0]
            assert title.startswith("val_acc · lora16")
            assert "┄ stop < 0.5" in title and "┄ threshold 0.8" in title
            assert "┄" in "".join(app.chart_panel.plain().splitlines()[1:])  # drawn

    run(scenario())


def test_decision_modal_shows_pilot_figures_next_to_the_threshold(tmp_path):
    app, engine, clock = snapshot_room(tmp_path, decided=False)

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DecisionScreen)
                           and app.screen.query("#pilot-figures"))
            text = str(app.screen.query_one("#pilot-figures").render())
            lines = {line.split()[0]: line for line in text.splitlines()[1:]}
            # the final values (the ledger's frozen 0.857 is lora16's best, not shown here)
            assert "0.853" in lines["lora16"] and "gain +0.014 meets" in lines["lora16"]
            assert "0.857" not in text and "0.839" in lines["control"]
            assert "misses threshold" in lines["lora64"] and "thresh 0.41" in lines["lora64"]
            suggested = str(app.screen.query_one("#suggested").render())
            assert "lora64 (pilot stopped by threshold 0.41)" in suggested
            assert "and val_acc >= 0.8" in str(app.screen.query(".dialog-body").first()
                                                    .render())
            await pilot.press("escape")  # later: the header keeps saying it is pending
            assert not isinstance(app.screen, DecisionScreen)
            assert "PENDING" in app.header_panel.plain()
            await pilot.press("x")
            assert isinstance(app.screen, DecisionScreen)
            await pilot.press("c")
            await wait_for(pilot, lambda: engine.actions)
            assert engine.actions == [("decide", (CONTINUE,), {"by": DecidedBy.PERSON})]

    run(scenario())


def screen_rows(app) -> list[list[Segment]]:
    """The screen as the terminal gets it, row by row: every line filter applied (the
    filter NO_COLOR installs included), the cursor moves between rows dropped. It reads
    the compositor as Textual's own `export_screenshot` does (no public way to get the
    styled segments)."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False)
    rows: list[list[Segment]] = []
    for segment in console.render(app.screen._compositor.render_update(full=True)):
        if segment.control:
            rows.append([])
        elif rows:
            rows[-1].append(segment)
    return rows


def hues(rows) -> set[tuple[int, int, int]]:
    """Every colour on screen that is not a grey: what a person without colour misses."""
    found = set()
    for row in rows:
        for segment in row:
            for color in (segment.style.color, segment.style.bgcolor) if segment.style else ():
                if color is not None and not color.is_default:
                    r, g, b = color.get_truecolor()
                    if not r == g == b:
                        found.add((r, g, b))
    return found


def rendered_room(tmp_path) -> tuple[list[list[Segment]], range]:
    """The 80x24 screen's rows, and which of them the runs table holds."""
    tmp_path.mkdir()
    app, engine, clock = snapshot_room(tmp_path)
    rows, runs = [], []

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(pilot, app)
            rows.extend(screen_rows(app))
            runs.append(range(app.runs_panel.region.y, app.runs_panel.region.bottom))

    run(scenario())
    return rows, runs[0]


def test_no_color_still_tells_states_apart_in_words_and_glyphs(tmp_path, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert hues(rendered_room(tmp_path / "colour")[0])  # with colour, hues carry meaning
    monkeypatch.setenv("NO_COLOR", "1")
    rows, runs_table = rendered_room(tmp_path / "no-colour")
    assert not hues(rows)  # without: nothing on screen is told by a hue alone
    lines = ["".join(segment.text for segment in row) for row in rows]

    def line_of(run_id: str) -> str:
        (line,) = [lines[y] for y in runs_table if run_id in lines[y]]
        return line

    assert "slack +1 d 6 h ok" in next(line for line in lines if "slack" in line)
    assert "✓ done" in line_of("lora16·pilot")
    assert "✕ thresh 0.41" in line_of("lora64·pilot")
    control = line_of("control·run")
    assert control.startswith("▶") and "running" in control  # the selection is a glyph
    assert "24 min✓" in control  # a verified checkpoint says so, not only in green
    assert "running" in line_of("lora16·run")
