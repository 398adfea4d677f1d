"""Sentences a newcomer reads that must be true (issue 36, item 13, the code's part):
`--help` names [notify] and [store]; `verify /nope` says the folder does not exist;
the help does not offer `r Start engine` while the engine runs."""

from __future__ import annotations

import json

import pytest

from clikit import cli
from test_app_keys import SLOW, room, running_row  # noqa: F401 - room is a fixture
from test_app_support import run, wait_for
from tui.app.screens import HelpScreen


def test_help_names_the_notify_and_store_sections():
    out = cli("--help").stdout
    assert "[notify]" in out and "[store]" in out and "notify --test" in out


def test_verify_of_a_folder_that_does_not_exist_says_so(tmp_path):
    done = cli("verify", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert done.stderr.startswith(f"itera-tui: verify: {tmp_path / 'nope'}: the folder does "
                                  "not exist")
    assert "NOT VERIFIED" not in done.stdout + done.stderr
    (tmp_path / "file").write_text("x")
    as_json = cli("verify", str(tmp_path / "file"), "--json")
    assert as_json.returncode == 2
    assert "is a file, not a bundle folder" in json.loads(as_json.stdout)["error"]


def test_a_bundle_that_is_not_there(tmp_path):
    done = cli("verify", str(tmp_path / "nope"), "--json")
    assert done.returncode == 2
    assert json.loads(done.stdout)["failures"] == [
        {"path": ".", "problem": "the folder does not exist"}]
    human = cli("verify", str(tmp_path / "nope"))
    assert human.returncode == 2
    assert human.stderr.splitlines() == [  # bad input, said as such (issue 36)
        f"itera-tui: verify: {tmp_path / 'nope'}: the folder does not exist (a bundle is the "
        "folder `itera-tui wrapup` writes: outputs/bundle by default)"]


def test_the_help_offers_no_start_engine_while_the_engine_runs(room):  # noqa: F811
    async def scenario():
        app, engine, path = room([("control", "mandatory", SLOW)])
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: running_row(app))
            await pilot.press("question_mark")
            assert isinstance(app.screen, HelpScreen)
            text = app.screen.text()
            assert "start engine" not in text.lower() and not any(
                line.split()[0] == "r" for line in text.splitlines() if line.strip()), text

    run(scenario())
