"""The command that fetches the bundle: whole on the screen, pasted as one command, and
in a file `cat` shows whole (issue 36 item 5)."""

from __future__ import annotations

import shlex
import subprocess
from types import SimpleNamespace

import pytest

from test_app_support import screen_lines, shown, snapshot_room, wait_for
from tui.app.screens import DoneScreen
from tui.campaign.retrieval import Origin, fetch_file, retrieval_command, wrapped


def _plan(root, name="nli adapters"):
    return SimpleNamespace(root=root, campaign=SimpleNamespace(name=name))


def _pasted_argv(text: str) -> list[str]:
    """What a real bash makes of `text` pasted as it is (lines and continuations), with
    the program replaced by printf so it prints each argument it was given."""
    program, rest = text.split(" ", 1)
    out = subprocess.run(["bash", "-c", "printf '%s\\0' " + rest], capture_output=True,
                         check=True, timeout=30).stdout.decode()
    return [program] + out.split("\0")[:-1]


def test_a_folder_under_the_home_folder_is_named_from_it_so_the_command_fits(tmp_path):
    home = tmp_path / "home" / "alice"
    camp = home / "nli"
    camp.mkdir(parents=True)
    origin = Origin.here(_plan(camp), {"SSH_CONNECTION": "198.51.100.9 50122 203.0.113.7 22",
                                       "HOME": str(home)})
    command = retrieval_command(_plan(camp), "outputs/bundle", origin)
    user = origin.user
    assert command == f"rsync -avP {user}@203.0.113.7:nli/outputs/bundle/ ./nli-adapters-bundle"
    assert str(tmp_path) not in command  # rsync reads a relative far path from the home
    outside = Origin("bo", "203.0.113.7", None, "/srv/nli", str(home))
    assert "bo@203.0.113.7:/srv/nli/outputs/bundle/" in retrieval_command(
        _plan(camp), "outputs/bundle", outside)  # not under the home: absolute, as before


@pytest.mark.slow  # a real bash reads the pasted lines
def test_a_wrapped_command_pastes_as_the_same_command_in_a_real_shell():
    command = retrieval_command(_plan("/x"), "outputs/bundle", Origin(
        "alice", "203.0.113.7", 40022, "/srv/campaigns/a folder with spaces/nli-2026-12"))
    assert len(command) > 80
    for width in (30, 50, 80):
        text = wrapped(command, width)
        lines = text.split("\n")
        assert len(lines) > 1
        assert all(line.endswith("\\") for line in lines[:-1])
        assert all(len(line) <= width for line in lines), (width, lines)
        assert _pasted_argv(text) == shlex.split(command), width
    assert wrapped("rsync -avP a:b/ ./c", 80) == "rsync -avP a:b/ ./c"  # fits: untouched


@pytest.mark.slow  # a real bash reads the lines as the screen shows them
def test_the_ending_shows_the_whole_command_at_80_columns_and_says_what_y_needs(
        tmp_path, monkeypatch):
    monkeypatch.setenv("TMUX", "/tmp/tmux-1000/default,1,0")
    long = dict(user="alice", host="203.0.113.7", port=40022,
                folder="/srv/campaigns/natural-language-inference/adapters-2026-12-01")
    monkeypatch.setattr(Origin, "here", classmethod(lambda cls, plan, environ=None:
                                                    cls(**long)))
    app, _, _ = snapshot_room(tmp_path, ending="yes")

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen))
            await shown(pilot, app, "rsync")
            command = app.screen.view.command
            assert len(command) > 80
            lines = screen_lines(app)
            assert all(len(line) <= 80 for line in lines)
            first = next(i for i, line in enumerate(lines) if line.strip().startswith("rsync"))
            selected = []
            for line in lines[first:]:  # as a selection takes them: whole screen lines
                selected.append(line.rstrip())
                if not line.rstrip().endswith("\\"):
                    break
            assert len(selected) > 1  # wrapped, with continuations
            assert _pasted_argv("\n".join(selected)) == shlex.split(command)  # nothing cut
            said = " ".join(" ".join(lines).split())
            assert "set -g set-clipboard on" in said  # what y needs, before it is pressed
            assert "cat outputs/FETCH.txt" in said

    import asyncio

    asyncio.run(scenario())


def test_the_fetch_file_sits_beside_the_bundle():
    assert fetch_file("outputs/bundle") == "outputs/FETCH.txt"
    assert fetch_file("out/x/bundle") == "out/x/FETCH.txt"


def test_an_ending_that_gains_its_command_shows_it_and_survives_a_resize():
    """The ending can open before the bundle is written (no command yet) and gain the
    command while open; a resize then rewraps a command the first view did not have
    (CI once crashed the room here: NoMatches '#done-command')."""
    import asyncio

    from textual.app import App

    from tui.app.ending_view import EndingView

    before = EndingView("inconclusive", "inconclusive", (("verdict", "wrapping up"),), None)
    after = EndingView("inconclusive", "inconclusive", (("verdict", "inconclusive: x"),),
                       "rsync -avP alice@203.0.113.7:nli/outputs/bundle/ ./nli-bundle",
                       bundle="outputs/bundle")

    class Holder(App):
        def on_mount(self):
            self.push_screen(DoneScreen(before))

    async def scenario():
        app = Holder()
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: isinstance(app.screen, DoneScreen)
                           and app.screen.is_mounted)
            said = " ".join(screen_lines(app))
            assert "rsync" not in said and "y copies" not in said
            app.screen.show(after)
            await pilot.resize_terminal(60, 24)
            await wait_for(pilot, lambda: "rsync -avP" in " ".join(screen_lines(app)),
                           what="the command, once the view has one")
            said = " ".join(" ".join(screen_lines(app)).split())
            assert "y copies" in said and "inconclusive: x" in said
            await pilot.press("y")
            await wait_for(pilot, lambda: "OSC 52" in " ".join(screen_lines(app)))
            app.screen.show(before)  # and back: the command goes, nothing crashes
            await pilot.resize_terminal(80, 24)
            await wait_for(pilot, lambda: "rsync" not in " ".join(screen_lines(app)))

    asyncio.run(scenario())


@pytest.mark.parametrize("name, folder", [
    ("demo: topic of the last segment", "./demo-topic-of-the-last-segment-bundle"),
    ("nli adapters", "./nli-adapters-bundle"), ("a -- b", "./a-b-bundle"),
    ("..hidden", "./hidden-bundle"), ("::", "./campaign-bundle")])
def test_the_bundle_folder_name_has_no_double_dash(tmp_path, name, folder):
    """Issue 44, item 8: the demo's bundle came as `demo--topic-…-bundle`."""
    from tui.campaign.retrieval import bundle_folder

    assert bundle_folder(_plan(tmp_path, name)) == folder


@pytest.mark.parametrize("name, folder", [
    ("demo: topic of the last segment", "./demo-topic-of-the-last-segment-bundle"),
    ("a -- b", "./a-b-bundle")])
def test_the_report_names_the_bundle_folder_the_ending_names(tmp_path, name, folder):
    """The newcomer walk, round 6: the ending and FETCH.txt said
    `./demo-topic-…-bundle`, the report's Retrieval section (rsync, then
    `itera-tui verify`) still `./demo--topic-…-bundle`: two folders for one copy."""
    from tui.bundle.report import _retrieval

    plan = SimpleNamespace(root=tmp_path, campaign=SimpleNamespace(name=name, link_mbps=100))
    text = "\n".join(_retrieval(plan, SimpleNamespace(retrieval_hours=1 / 60), 1000, 3,
                                "outputs/bundle"))
    assert f"outputs/bundle/' {folder}/" in text and f"`itera-tui verify {folder}`" in text, text
    assert "--" not in text.replace("--partial", ""), text


def test_an_ending_whose_parts_are_gone_when_it_mounts_is_no_error():
    """The ending can be pushed as the app closes (a wrap-up ending the moment a person
    quits): its mount then finds its parts removed already. Seen once in the suite, as
    NoMatches '#done-fetch' out of `on_mount`; the screen updates the parts it finds."""
    from tui.app.ending_view import EndingView

    view = EndingView("inconclusive", "inconclusive", (("verdict", "inconclusive: x"),),
                      "rsync -avP alice@203.0.113.7:nli/outputs/bundle/ ./nli-bundle",
                      bundle="outputs/bundle")
    screen = DoneScreen(view)  # never composed: no part to find, as after a teardown
    screen.on_mount()
