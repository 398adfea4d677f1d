"""Every command a notice or a screen suggests works in the state it is suggested in
(issue 36, item 3).

The decision notice named `itera-tui run --headless --decide ...` while a detached
engine waited (refused: the engine holds the campaign), and headless, exiting at
the decision point, named `itera-tui decide` (refused: no engine). Each test
brings a real campaign to the state, takes the text the person is shown, and
runs every `itera-tui ...` command in it (the first of `a|b|c`, an ID made a
variant's id) exactly as a shell would, in the campaign folder.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from types import SimpleNamespace

import pytest

from servicekit import end_engine, env_with, wait_until
from test_app_support import events_of, ledger
from test_engine_decisions import PILOT, three_variants
from enginekit import write_plan

pytestmark = pytest.mark.slow

COMMAND = re.compile(r"`(itera-tui(?: [^`]*)?)`")


def suggested(text: str, variant: str = "c") -> list[list[str]]:
    """The commands a text names, as argv; the room alone (`itera-tui`) is left out:
    it needs a terminal (tests/test_app_process.py opens it)."""
    out = []
    for command in COMMAND.findall(text):
        argv = [word.split("|")[0].replace("ID", variant) for word in shlex.split(command)]
        if argv != ["itera-tui"]:
            out.append(argv)
    return out


def run_suggested(argv: list[str], root) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tui.cli", *argv[1:]], cwd=root,
                          env=env_with(), stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=240)


def _decision_notice(path) -> str:
    from tui.campaign import load_plan
    from tui.engine.ledger.state import replay
    from tui.notify.notices import Composer

    plan = load_plan(path, check_files=False)
    state = replay(ledger(path))
    composer = Composer(plan, lambda: SimpleNamespace(state=state))
    notice = composer.compose(events_of(path, "decision_pending")[0])
    assert notice is not None
    return notice.body


def test_the_decision_notice_s_commands_work_while_the_engine_waits(tmp_path):
    path = write_plan(tmp_path, three_variants(), pilot=PILOT)
    try:
        started = run_suggested(["itera-tui", "engine", "start"], tmp_path)
        assert started.returncode == 0, started.stderr
        wait_until(lambda: events_of(path, "decision_pending"), 120, "the decision point")
        commands = suggested(_decision_notice(path))
        assert commands, _decision_notice(path)
        for argv in commands:
            done = run_suggested(argv, tmp_path)
            assert done.returncode == 0, (argv, done.stdout, done.stderr)
        wait_until(lambda: events_of(path, "decision_taken"), 60, "the decision taken")
    finally:
        end_engine(tmp_path)


def test_the_commands_headless_names_at_the_decision_point_work_after_it_exits(tmp_path):
    roots = []
    try:
        first = tmp_path / "first"
        first.mkdir()
        roots.append(first)
        path = write_plan(first, three_variants(), pilot=PILOT)
        stopped = run_suggested(["itera-tui", "run", "--headless"], first)
        assert stopped.returncode == 3, stopped.stdout + stopped.stderr  # waits for a person
        commands = suggested(stopped.stdout.strip().splitlines()[-1])
        notice = suggested(_decision_notice(path))
        assert {c[1] for c in commands} >= {"decide", "run"} and notice
        for i, argv in enumerate(commands + notice):
            root = tmp_path / f"copy{i}"
            subprocess.run(["cp", "-a", str(first), str(root)], check=True)
            roots.append(root)
            done = run_suggested(argv, root)
            assert done.returncode != 2 and "driving this campaign" not in done.stderr \
                and "no engine" not in done.stderr, (argv, done.stdout, done.stderr)
            wait_until(lambda: events_of(root / "campaign.toml", "decision_taken"), 120,
                       f"the decision taken by {argv}")
    finally:
        for root in roots:
            end_engine(root)


def test_the_no_engine_answer_and_the_room_s_farewell_name_commands_that_work(tmp_path):
    """`itera-tui pause` with no engine names `itera-tui engine start`; the room's farewell
    (tui/app/main.py) names `itera-tui engine stop` while the engine drives: each is run
    in that state."""
    from test_app_support import campaign

    path = campaign(tmp_path, [("control", "mandatory", ["--steps", "100000", "--sleep",
                                                         "0.05"])])
    try:
        refused = run_suggested(["itera-tui", "pause"], tmp_path)
        assert refused.returncode == 4, refused.stderr
        for argv in suggested(refused.stderr):
            done = run_suggested(argv, tmp_path)
            assert done.returncode == 0, (argv, done.stdout, done.stderr)
        wait_until(lambda: events_of(path, "run_launched"), 60, "the engine driving")
        from tui.app.main import FAREWELL

        for argv in suggested(FAREWELL):
            done = run_suggested(argv, tmp_path)
            assert done.returncode == 0, (argv, done.stdout, done.stderr)
        wait_until(lambda: events_of(path, "engine_stopped"), 60, "the engine stopped")
    finally:
        end_engine(tmp_path)
