"""A ledger the engine cannot write stops it with one clear line and its own exit status.

Before: `run --headless` on an immutable ledger hung for ever and said nothing
(the failed append was kept in the tick error, never printed), and an
append-only ledger (`chattr +a`) with a torn tail was a PermissionError
traceback from the torn-tail repair. Now the first write that fails stops the
engine (nothing is acted on that is not recorded): one line on stderr naming
the ledger and what to do, exit status 5, the runs left alone; an append-only
torn tail is ended with a newline (it stays as one damaged line) and said.
The engine is the real `itera-tui` process; the run a real printer.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from clikit import cli
from conftest import REPO, run_cli
from enginekit import printer_cmd, printer_plan, wait_for, write_plan
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger
from tui.engine.errors import EXIT_LEDGER_UNWRITABLE


def _attr(path, flag: str) -> bool:
    done = subprocess.run(["chattr", flag, str(path)], capture_output=True)
    return done.returncode == 0


@pytest.fixture
def locked(tmp_path):
    """A function making a file immutable (+i) or append-only (+a); undone at the end."""
    changed = []

    def lock(path, flag: str) -> None:
        if not _attr(path, f"+{flag}"):
            pytest.skip(f"chattr +{flag} is not permitted here (needs CAP_LINUX_IMMUTABLE)")
        changed.append((path, flag))

    yield lock
    for path, flag in changed:
        _attr(path, f"-{flag}")


def _plan(tmp_path, *args):
    return printer_plan(tmp_path, args, '[[stop]]\nrule = "non_finite"\n')


def _started(path):
    Engine(load_plan(path)).open().close()  # campaign_started, window, engine events
    return path.parent / ".itera" / "ledger.jsonl"


def _one_clear_line(stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    lines = [line for line in stderr.splitlines() if "cannot write" in line]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("itera-tui: the engine stopped: it cannot write "
                               ".itera/ledger.jsonl (Operation not permitted)")


@pytest.mark.slow
def test_an_immutable_ledger_at_start_is_one_clear_line_and_exit_5(tmp_path, locked):
    path = _plan(tmp_path, "--steps", "5")
    locked(_started(path), "i")
    done = run_cli("run", "--headless", str(path), cwd=tmp_path, timeout=60)
    assert done.returncode == EXIT_LEDGER_UNWRITABLE, (done.stdout, done.stderr)
    _one_clear_line(done.stderr)


@pytest.mark.slow
def test_a_ledger_made_immutable_mid_run_stops_the_engine_not_the_run(tmp_path, locked):
    path = _plan(tmp_path, "--steps", "400", "--sleep", "0.05", "--nan-at", "60")
    ledger = tmp_path / ".itera" / "ledger.jsonl"
    env = dict(os.environ, PYTHONPATH=str(REPO))
    engine = subprocess.Popen([sys.executable, "-m", "tui.cli", "run", "--headless",
                               "--no-wrapup", str(path)], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = None
    try:
        # launched, and its first record's progress mark written (the next mark is 30 s
        # away): the NaN at step 60 is the next fact to record, and it cannot be
        wait_for(lambda: ledger.exists() and {"run_launched", "run_progress"} <= {
            e["event"] for e in read_ledger(ledger)}, what="the launch and its first record")
        pid = next(e["pid"] for e in read_ledger(ledger) if e["event"] == "run_launched")
        locked(ledger, "i")
        out, err = engine.communicate(timeout=90)
        assert engine.returncode == EXIT_LEDGER_UNWRITABLE, (out, err)
        _one_clear_line(err)
        assert "stop_rule_fired" in err  # the fact it could not record, named
        assert os.getpgid(pid) == pid  # the run itself goes on in its own session
    finally:
        if engine.poll() is None:
            engine.kill()
            engine.wait()
        if pid:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


@pytest.mark.slow
def test_an_append_only_ledger_with_a_torn_tail_opens_and_says_so(tmp_path, locked):
    path = _plan(tmp_path, "--steps", "5")
    ledger = _started(path)
    with open(ledger, "ab") as f:
        f.write(b'{"seq": 99, "t": 17645')  # a crash in the middle of a write
    locked(ledger, "a")
    engine = Engine(load_plan(path)).open()  # before: PermissionError from the repair
    try:
        warnings = [w.message for w in engine.state.warnings]
        assert any("torn last line (22 bytes)" in w and "ended with a newline" in w
                   for w in warnings), warnings
    finally:
        engine.close()
    events = read_ledger(ledger)
    assert events[-1]["event"] == "engine_stopped"  # appends go on after the torn line
    status = cli("status", str(path), cwd=tmp_path)
    assert status.returncode == 0 and "Traceback" not in status.stderr, status.stderr


@pytest.mark.slow
def test_the_room_closes_with_the_same_line_and_exit_5(tmp_path, locked):
    import asyncio

    from test_app_support import kill_runs, wait_for as room_wait
    from tui.app.app import ControlRoom
    from tui.session import CampaignSession

    path = _plan(tmp_path, "--steps", "400", "--sleep", "0.05", "--nan-at", "60")
    plan = load_plan(path)
    session = CampaignSession(plan, Engine(plan, poll_interval=0.05), poll_interval=0.05).open()
    app = ControlRoom(plan, session, time.time, tick_interval=0.1, refresh_interval=0.2)
    ledger = tmp_path / ".itera" / "ledger.jsonl"

    async def scenario():
        async with app.run_test(size=(80, 24)) as pilot:
            await room_wait(pilot, lambda: any(e["event"] == "run_launched"
                                               for e in read_ledger(ledger)), what="the launch")
            locked(ledger, "i")  # the NaN is the next fact to record
            await room_wait(pilot, lambda: app.return_code is not None, timeout=60,
                            what="the room to close")

    try:
        asyncio.run(scenario())
        assert app.return_code == EXIT_LEDGER_UNWRITABLE
        assert session.engine.fatal and "cannot write .itera/ledger.jsonl" in session.engine.fatal
    finally:
        app.pump.stop()
        session.close()
        kill_runs(session.engine)
