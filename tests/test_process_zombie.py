"""A zombie has ended: its exit status comes from the launcher's exit.json.

On rented boxes that are containers, PID 1 often reaps nobody, so a run whose
control room died stays in the process table as a zombie. These tests make
real zombies (a parent process that never waits) and check that neither the
pid check nor the engine takes one for a live run.
"""

import json
import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from conftest import REPO
from enginekit import wait_for, write_plan
from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.runs import processes as process

ENV = dict(os.environ, PYTHONPATH=str(REPO))


def unreaping_parent(code: str) -> subprocess.Popen:
    """A process that runs `code` (which prints one line) and then never waits."""
    script = code + "\nimport time\ntime.sleep(120)\n"
    return subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            text=True, env=ENV, cwd=REPO)


def zombie(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def parents():
    started = []
    yield started
    for parent in started:
        parent.kill()
        parent.wait(10)


@pytest.mark.slow
def test_a_zombie_is_not_the_same_process(parents):
    parent = unreaping_parent(textwrap.dedent("""
        import os
        pid = os.fork()
        if pid == 0:
            os._exit(3)
        print(pid, flush=True)
    """))
    parents.append(parent)
    pid = int(parent.stdout.readline())
    wait_for(lambda: zombie(pid), timeout=10, what="the child to become a zombie")
    start = psutil.Process(pid).create_time()  # a zombie still has a start time
    assert not process.same_process(pid, start)
    assert process.same_process(parent.pid, psutil.Process(parent.pid).create_time())


@pytest.mark.slow
def test_an_unreaped_launcher_has_left_its_exit_status(parents, tmp_path):
    run_dir = tmp_path / "runs" / "r-1"
    parent = unreaping_parent(textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from tui.engine.runs import processes as process
        launched = process.launch([sys.executable, "-c", "import sys; sys.exit(5)"],
                                  dict(os.environ), Path({str(run_dir)!r}), Path("."))
        print(launched.pid, launched.pid_start, flush=True)
    """))
    parents.append(parent)
    pid, start = parent.stdout.readline().split()
    pid, start = int(pid), float(start)
    wait_for(lambda: zombie(pid), timeout=20, what="the launcher to become a zombie")
    assert not process.same_process(pid, start)
    assert process.read_exit(run_dir)["exit_code"] == 5


@pytest.mark.slow
def test_the_engine_records_the_exit_of_a_run_whose_launcher_is_a_zombie(parents, tmp_path):
    gate = tmp_path / "go"  # the run exits once the test has seen it reattached: a
    # busy box's slow restart cannot let it end before the next engine looks
    exits_at_the_gate = ("import os, sys, time\n"
                         f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
                         "sys.exit(7)\n")
    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {json.dumps(["python", "-c", exits_at_the_gate])}
    minutes = 1
    """)
    # the first control room launches the run, stops, and stays alive without reaping
    parent = unreaping_parent(textwrap.dedent(f"""
        from tui.campaign import load_plan
        from tui.engine import Engine
        engine = Engine(load_plan({str(path)!r})).open()
        while not engine.state.running:
            engine.tick()
        rid = engine.state.running[0].id
        engine.close()
        print(rid, flush=True)
    """))
    parents.append(parent)
    rid = parent.stdout.readline().strip()
    engine = Engine(load_plan(path), poll_interval=0.05).open()
    seen_zombie = False
    try:
        run = engine.state.run(rid)
        assert run.state == "running"  # reattached: still alive at the restart
        gate.touch()
        deadline = time.time() + 20
        while engine.state.run(rid).state == "running":
            assert time.time() < deadline, "a zombie launcher was taken for a live run"
            seen_zombie = seen_zombie or zombie(run.pid)
            engine.tick()
            time.sleep(0.05)
    finally:
        gate.touch()  # whatever the outcome, the run is let go: no process outlives the test
        engine.close()
    run = engine.state.run(rid)
    assert seen_zombie and run.state == "failed" and run.exit_code == 7


def test_a_run_directory_is_never_reused_the_attempt_moves_on(tmp_path):
    # a directory no event claims (empty: a non-empty one is refused at open) is skipped
    from enginekit import printer_cmd
    from tui.engine.runs.ids import run_id

    argv = ["python", "scripts/printer.py", "--steps", "3"]
    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "3")}
    minutes = 1
    """)
    config = {"argv": argv, "params": {}, "kind": "run", "max_steps": None, "gpus": 1}
    old = tmp_path / ".itera" / "runs" / run_id("control", config, 1)
    old.mkdir(parents=True)
    from fakeprocs import drive_plan

    engine, _ = drive_plan(path)  # the run's id and folder are the subject, not its process
    (run,) = engine.state.runs
    assert run.id == run_id("control", config, 2) and run.state == "completed"
    assert not any(old.iterdir())  # nothing of the new run went into it


@pytest.mark.parametrize("content, code", [
    ('{"exit_code": 3, "t": 1}', 3), ('{"exit_code": "3"}', None),
    ('{"exit_code": true}', None), ("[3]", "absent"), ("{", "absent"),
    ("\0\0\0", "absent"), ('{"t": 1}', None)])
def test_exit_json_is_read_defensively(tmp_path, content, code):
    (tmp_path / "exit.json").write_text(content)
    info = process.read_exit(tmp_path)
    assert (info is None) if code == "absent" else (info["exit_code"] == code)


def test_exit_json_that_is_a_directory_reads_as_absent(tmp_path):
    (tmp_path / "exit.json").mkdir()
    assert process.read_exit(tmp_path) is None


@pytest.mark.parametrize("pid", [0, 1, -5, None, True, 2**70])
def test_a_pid_from_a_damaged_record_never_signals_our_group_or_inits(pid):
    # signal 0 only checks: killpg(0, 0) would succeed, since group 0 is our own
    assert process.signal_group(pid, 0) is False
    assert process.same_process(pid, None) is False
