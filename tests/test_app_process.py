"""The control room as a process: `itera-tui PATH`, a lock held elsewhere, no torch.

These run real subprocesses: the CLI with Textual's headless driver (keys pressed
through TEXTUAL_PRESS), and a whole tiny campaign to its wrap-up, after which
the process's sys.modules must not contain torch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import psutil
import pytest

from clikit import cli
from conftest import REPO, run_cli
from servicekit import end_engine, wait_until
from test_app_support import SCRIPTS, campaign, events_of, kill_runs
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger, replay


HEADLESS = {"TEXTUAL_DRIVER": "textual.drivers.headless_driver:HeadlessDriver"}


def env_with(**extra) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


@pytest.mark.slow
def test_itera_tui_path_opens_the_room_as_a_client_and_q_leaves_the_engine_driving(tmp_path):
    path = campaign(tmp_path, [("control", "mandatory", ["--steps", "100000", "--sleep", "0.05"])])
    code = ("import gc, json, sys; from tui.cli import main; rc = main(sys.argv[1:]); "
            "print(json.dumps({'rc': rc, 'torch': 'torch' in sys.modules, "
            "'textual': 'textual' in sys.modules, 'gc': gc.isenabled(), "
            "'frozen': gc.get_freeze_count() > 0}))")
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=tmp_path,
                              env=env_with(**HEADLESS, TEXTUAL_PRESS="q"), text=True,
                              capture_output=True, timeout=120)
        report = json.loads(proc.stdout.strip().splitlines()[-1])
        # the cyclic GC waited for the first paint, froze startup's objects, and is back on
        assert report == {"rc": 0, "torch": False, "textual": True, "gc": True,
                          "frozen": True}, proc.stderr[-2000:]
        # the room is gone, the engine it started is not: the run is launched and alive
        wait_until(lambda: events_of(path, "run_launched"), 90, "the launch")
        (launched,) = events_of(path, "run_launched")
        assert psutil.pid_exists(launched["pid"])
        assert not events_of(path, "engine_stopped")
    finally:
        end_engine(tmp_path)


def room_until(path, argv, event: str, timeout: float = 60,
               sig: int = signal.SIGTERM) -> subprocess.CompletedProcess:
    """Run the room as a process until the ledger shows `event`, then send it `sig`."""
    from enginekit import wait_while_running

    proc = subprocess.Popen(argv, cwd=path.parent, env=env_with(**HEADLESS), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    wait_while_running(proc, lambda: events_of(path, event) and catches(proc.pid, sig),
                       timeout, what=f"{event} (and the room's handler)", every=0.1)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def catches(pid: int, sig: int) -> bool:
    """Whether the process has a handler for `sig` (its SigCgt mask in /proc)."""
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) >> (sig - 1) & 1)
    except OSError:
        return False
    return False


@pytest.mark.slow
def test_sighup_quits_the_room_like_q_and_the_engine_goes_on(tmp_path):
    # README: "SIGTERM or SIGHUP (tmux kill-session, a closed ssh) close the room like q"
    path = campaign(tmp_path, [("control", "mandatory", ["--steps", "100000", "--sleep", "0.05"])])
    try:
        proc = room_until(path, [sys.executable, "-m", "tui.cli", str(path)], "run_launched",
                          sig=signal.SIGHUP)
        assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
        assert "goes on driving the campaign" in proc.stderr
        state = replay(read_ledger(tmp_path / ".itera" / "ledger.jsonl"))
        (run,) = state.runs
        assert run.state == "running" and psutil.pid_exists(run.pid)
        assert not events_of(path, "engine_stopped")  # the engine is not the room's
        assert not events_of(path, "run_stop_requested")
    finally:
        end_engine(tmp_path)


@pytest.mark.slow
def test_an_engine_lock_held_by_a_process_that_serves_no_socket_is_exit_2_in_words(tmp_path):
    path = campaign(tmp_path, [("control", "mandatory", ["--steps", "100000", "--sleep", "0.05"])])
    engine = Engine(load_plan(path)).open()  # an engine in a process of its own, not serving
    try:
        proc = run_cli(str(path), cwd=tmp_path, env=HEADLESS, timeout=120)
        assert proc.returncode == 2
        assert "another itera-tui" in proc.stderr and "Traceback" not in proc.stderr
        assert f"pid {os.getpid()}" in proc.stderr
    finally:
        engine.close()
        kill_runs(engine)


def test_bad_campaign_file_is_exit_2_before_any_screen(tmp_path):
    path = tmp_path / "campaign.toml"
    path.write_text("[campaign]\nname = 'x'\n")
    proc = cli(str(path), cwd=tmp_path, env=HEADLESS)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "campaign.question" in proc.stderr  # one clear message naming the key


@pytest.mark.slow
def test_a_whole_campaign_to_its_bundle_never_imports_torch(tmp_path):
    path = campaign(tmp_path, [("control", "mandatory", ["--steps", "20", "--sleep", "0.01"])])
    proc = subprocess.run([sys.executable, str(SCRIPTS / "room_lifecycle.py"), str(path)],
                          cwd=tmp_path, env=env_with(), capture_output=True, text=True,
                          timeout=150)
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["textual"] is True
    assert report["torch"] is False, report["heavy"]
    # the wrap-up ran by itself at the end of the campaign, and its bundle verified
    assert report["wrapup"]["ok"] is True, report["wrapup"]
    assert report["wrapup"]["text"].startswith("bundle verified")


def test_the_gc_is_back_on_when_the_room_fails_before_its_first_frame(monkeypatch, tmp_path):
    """run_app holds the cyclic GC off until the first paint; a room that never paints
    (another itera-tui holds the campaign, a bad file) must not leave it off."""
    import gc

    from tui.app import main as room_main
    from tui.engine.errors import EngineError

    def refused(path):
        assert not gc.isenabled()  # held off while the room starts
        raise EngineError("another itera-tui (pid 1) is driving this campaign")

    monkeypatch.setattr(room_main, "_run", refused)
    with pytest.raises(EngineError):
        room_main.run_app(tmp_path / "campaign.toml")
    assert gc.isenabled()
