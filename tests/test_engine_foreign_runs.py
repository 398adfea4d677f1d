"""Two copies of one campaign on one box: a restarted engine never touches the other's runs.

Run ids repeat across copies (the same variant, config and attempt). Before the
fix, an engine killed at launch looked for the run it may have started by run
id alone, adopted the other copy's launcher, and ended that copy's training
as a "leftover": the other campaign's run ended by SIGTERM and its verdict
changed. Here copy B's engine is killed -9 right after its launch, B's run
dies, and B's ledger is left as a kill between the launch intent and the
launch record leaves it; copy A runs meanwhile, and B's engine is started again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from clikit import cli
from conftest import REPO
from enginekit import drive, kill_9_headless_when, printer_cmd, wait_for, write_plan
from test_app_support import kill_runs
from tui.engine import read_ledger, replay

pytestmark = pytest.mark.slow

VARIANT = f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--steps", "300", "--sleep", "0.05")}
minutes = 1
"""


def ledger(root: Path) -> list[dict]:
    return read_ledger(root / ".itera" / "ledger.jsonl")


def launched(root: Path) -> list[dict]:
    return [e for e in ledger(root) if e["event"] == "run_launched"]


def cut_after_intent(root: Path) -> None:
    """The ledger as a kill -9 between `run_launch_intent` and `run_launched` leaves it."""
    path = root / ".itera" / "ledger.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    upto = next(i for i, line in enumerate(lines)
                if json.loads(line).get("event") == "run_launch_intent")
    path.write_bytes(b"".join(lines[:upto + 1]))


def test_a_restarted_engine_never_ends_another_copy_s_run_of_the_same_id(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        root.mkdir()
        write_plan(root, VARIANT)
    other = None
    try:
        kill_9_headless_when(b / "campaign.toml", lambda: launched(b), "B's launch")
        b_run = launched(b)[0]
        # B's training dies too (its launcher records the status), before B comes back
        for child in psutil.Process(b_run["pid"]).children(recursive=True):
            child.send_signal(signal.SIGKILL)
        wait_for(lambda: (b / ".itera/runs" / b_run["run"] / "exit.json").exists(),
                 what="B's exit.json")
        cut_after_intent(b)

        other = subprocess.Popen(
            [sys.executable, "-m", "tui.cli", "run", "--headless", "--no-wrapup",
             str(a / "campaign.toml")], cwd=a, env=dict(os.environ, PYTHONPATH=str(REPO)),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        a_stdout = lambda: (a / ".itera/runs" / b_run["run"] / "stdout.log")  # noqa: E731
        wait_for(lambda: launched(a) and a_stdout().exists()
                 and a_stdout().read_text().count("step") >= 3, timeout=60,
                 what="A's run printing")
        a_run = launched(a)[0]
        assert a_run["run"] == b_run["run"]  # the same id in both copies: the point

        # B comes back while A's run is alive, and drives its campaign to the end
        engine = drive(b / "campaign.toml", timeout=120)
        kill_runs(engine)

        assert other.wait(120) == 0  # A's campaign ended unblocked
    finally:
        if other is not None and other.poll() is None:
            other.kill()
            other.wait(10)
        for root in (a, b):
            kill_runs(replay(ledger(root)))

    b_events = ledger(b)
    settled = [e for e in b_events if e["event"] == "run_launched"
               and e["run"] == b_run["run"]]
    assert settled[0]["pid"] is None, settled  # ended before B came back: not A's launcher
    assert a_run["pid"] not in {e.get("pid") for e in b_events}
    assert not [e for e in b_events if e["event"].startswith("run_leftovers")]

    a_events = ledger(a)
    exited = [e for e in a_events if e["event"] == "run_exited"]
    assert [e["exit_code"] for e in exited] == [0], exited  # A's run ran to its end
    status = json.loads(cli("status", "--json", str(a / "campaign.toml"), cwd=a).stdout)
    assert [(r.id, r.state.value) for r in replay(a_events).runs] == \
        [(a_run["run"], "completed")]
    assert "failed" not in status["conclusion"]["text"], status["conclusion"]


def test_a_ledger_pid_of_another_copy_s_launcher_is_never_signalled(tmp_path):
    """A damaged or stale ledger line names a pid: the group is signalled only when that
    process is this run's launcher (run id, run directory, campaign folder), whatever
    the pid and its start time say."""
    from tui.engine.runs import processes as process
    from tui.engine.runs.belonging import RunIdentity
    from tui.engine.runs.leftovers import RunProcesses

    rid = "control-abc-1"
    mine, theirs = tmp_path / "a", tmp_path / "b"
    for root in (mine, theirs):
        (root / ".itera/runs" / rid).mkdir(parents=True)
    env = dict(os.environ, PYTHONPATH=str(REPO), ITERA_RUN_ID=rid,
               ITERA_RUN_DIR=str(theirs / ".itera/runs" / rid))
    other = subprocess.Popen([sys.executable, "-c", "import subprocess, time; "
                              "subprocess.Popen(['sleep', '60']); time.sleep(60)"], env=env,
                             cwd=theirs, start_new_session=True)
    try:
        start = psutil.Process(other.pid).create_time()
        wait_for(lambda: psutil.Process(other.pid).children(), what="its child")
        ours = RunIdentity.of(rid, mine / ".itera/runs" / rid, mine)
        assert process.terminate(other.pid, start, ours) is False
        assert process.kill(other.pid, start, ours) is False
        assert RunProcesses(ours, other.pid, start).find() == []  # its group is not ours
        procs = RunProcesses(ours, other.pid, start)
        procs.track(0.0)
        assert procs.find() == []  # nor are its children: it is not our launcher
        assert other.poll() is None
        # the same call with the other copy's identity does reach it: the check is real
        assert process.terminate(other.pid, start,
                                 RunIdentity.of(rid, theirs / ".itera/runs" / rid, theirs))
        other.wait(10)
    finally:
        try:
            os.killpg(other.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        other.wait(10)
