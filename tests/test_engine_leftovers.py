"""Processes that outlive their run are found, named in the ledger and ended.

Before: a child left in the run's group after a normal exit, or a `setsid()`
child after a stop, kept running (and would have kept its GPU); nothing
noticed. The hostile script is a real run that leaves both behind (the
setsid one ignores SIGTERM). One run exits by itself, one is stopped: for
each, `run_leftovers` names both processes (SIGTERM), then
`run_leftovers_killed` names the stubborn one (SIGKILL after the grace), and
no process of either run is alive at the end.
"""

from __future__ import annotations

import pytest

import re
import time

import psutil
import pytest

from enginekit import script_cmd, write_plan
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger


def _orphan_pids(run_dir) -> tuple[int, int] | None:
    found = re.search(r"group-child (\d+) setsid-child (\d+)",
                      (run_dir / "stdout.log").read_text(errors="replace"))
    return (int(found.group(1)), int(found.group(2))) if found else None


@pytest.mark.slow
def test_what_a_run_leaves_behind_is_named_and_ended_after_exit_and_after_stop(tmp_path):
    variants = f"""
    [[variant]]
    id = "exits"
    category = "mandatory"
    command = {script_cmd("hostile.py", "orphans", "--seconds", "3")}
    minutes = 1

    [[variant]]
    id = "stopped"
    category = "useful"
    command = {script_cmd("hostile.py", "orphans", "--seconds", "600")}
    minutes = 1
    """
    path = write_plan(tmp_path, variants, gpus=2)
    engine = Engine(load_plan(path), poll_interval=0.05).open()
    orphans: dict[str, tuple[int, int]] = {}
    stop_asked = False
    deadline = time.monotonic() + 90
    try:
        while not engine.finished or engine.watcher._leftovers:
            assert time.monotonic() < deadline, "the runs and their leftovers did not end"
            engine.tick()
            for run in engine.state.runs:
                if run.target not in orphans and run.pid:
                    pids = _orphan_pids(tmp_path / ".itera" / "runs" / run.id)
                    if pids:
                        orphans[run.target] = pids
            stopped = next((r for r in engine.state.running if r.target == "stopped"), None)
            if not stop_asked and stopped and "stopped" in orphans:
                engine.stop_run(stopped.id, "the test stops it")
                stop_asked = True
            time.sleep(0.05)
    finally:
        engine.close()
        for pids in orphans.values():  # never leave a sleeper behind, whatever failed
            for pid in pids:
                try:
                    psutil.Process(pid).kill()
                except psutil.Error:
                    pass
    assert set(orphans) == {"exits", "stopped"}
    ledger = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    runs = {r.target: r for r in engine.state.runs}
    assert runs["exits"].state == "completed" and runs["stopped"].state == "stopped"
    for target, (group_child, setsid_child) in orphans.items():
        rid = runs[target].id
        named = [e for e in ledger if e["event"] == "run_leftovers" and e["run"] == rid]
        assert len(named) == 1, (target, named)
        pids = {p["pid"] for p in named[0]["processes"]}
        if target == "exits":  # a stop's SIGTERM to the group ended the group child already
            assert group_child in pids
        assert setsid_child in pids, (target, named[0])
        killed = [e for e in ledger if e["event"] == "run_leftovers_killed" and e["run"] == rid]
        assert [p["pid"] for p in killed[0]["processes"]] == [setsid_child]  # ignored SIGTERM
        for pid in (group_child, setsid_child):
            assert not _alive(pid), (target, pid)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.mark.slow
def test_a_compute_process_left_on_the_gpu_is_named_from_the_sessions_probe_sample(tmp_path):
    """NVML (faked: this box has no driver) lists a compute process on GPU 0 after the
    run that held it ended; the session hands its samples to the engine, which names it."""
    import subprocess
    import sys

    from enginekit import printer_cmd, wait_for
    from fake_pynvml import FakeGpu
    from test_app_support import fake_probes
    from tui.session import CampaignSession

    left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        path = write_plan(tmp_path, f"""
        [[variant]]
        id = "v"
        category = "mandatory"
        command = {printer_cmd("--steps", "20")}
        minutes = 1
        """)
        plan = load_plan(path)
        probes = fake_probes(plan, gpus=[FakeGpu(compute_pids=[left.pid])])
        session = CampaignSession(plan, Engine(plan, poll_interval=0.05, sample_interval=0.1),
                                  probes, poll_interval=0.05, sample_interval=0.05).open()
        try:
            def named():
                snap = session.step()
                return snap.engine.finished and [w.message for w in snap.state.warnings
                                                 if "still runs" in w.message]
            wait_for(named, timeout=60, what="the warning after the run's end")
            rid = session.engine.state.runs[-1].id
            said = named()
            assert len(said) == 1 and said[0].startswith(f"GPU 0 still runs pid {left.pid} (")
            assert said[0].endswith(f"after {rid} ended (no live run holds this GPU)")
            order = [e["event"] if e["event"] != "warning" or "still runs" not in e["message"]
                     else "left" for e in read_ledger(tmp_path / ".itera" / "ledger.jsonl")]
            assert order.index("run_exited") < order.index("left")  # not while it held GPU 0
        finally:
            session.close()
    finally:
        left.kill()
        left.wait()


@pytest.mark.slow
def test_another_campaign_s_run_with_the_same_id_is_never_taken_for_a_leftover(tmp_path):
    """Run ids repeat across folders (the same variant, config and attempt): a process
    of the same run id in another campaign folder is not this run's (found killing the
    runs of a parallel test campaign with the same plan)."""
    import os
    import subprocess
    import sys

    from tui.engine.runs.belonging import RunIdentity
    from tui.engine.runs.leftovers import RunProcesses

    mine, theirs = tmp_path / "a" / "runs" / "control-abc-1", tmp_path / "b" / "runs" / \
        "control-abc-1"
    for d in (mine, theirs):
        d.mkdir(parents=True)
    procs = []
    try:
        for d in (mine, theirs):
            env = dict(os.environ, ITERA_RUN_ID="control-abc-1", ITERA_RUN_DIR=str(d))
            procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                          env=env, start_new_session=True))
        found = {p.pid for p in RunProcesses(
            RunIdentity.of("control-abc-1", mine, tmp_path / "a"), None).find()}
        assert procs[0].pid in found and procs[1].pid not in found
    finally:
        for p in procs:
            p.kill()
            p.wait(10)


@pytest.mark.slow
def test_headless_without_wrapup_ends_the_leftovers_before_it_exits(tmp_path):
    """`run --headless --no-wrapup` exits as soon as the campaign ends; before, a setsid
    child that ignores SIGTERM got its SIGTERM and survived the exit (the SIGKILL after
    the grace is sent by a tick, and no tick came). Now the exit waits for the grace."""
    import os
    import subprocess
    import sys

    from conftest import REPO
    from enginekit import wait_for

    variants = f"""
    [[variant]]
    id = "exits"
    category = "mandatory"
    command = {script_cmd("hostile.py", "orphans", "--seconds", "1")}
    minutes = 1
    """
    path = write_plan(tmp_path, variants)
    orphans = None
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tui.cli", "run", "--headless", "--no-wrapup", str(path)],
            cwd=tmp_path, env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
            text=True, timeout=120)
        [rid] = [p.name for p in (tmp_path / ".itera" / "runs").iterdir()]
        orphans = _orphan_pids(tmp_path / ".itera" / "runs" / rid)
        assert done.returncode == 0, done.stderr
        assert orphans is not None
        # SIGKILL was sent before the exit; its delivery is the kernel's, a moment later
        wait_for(lambda: not any(_alive(pid) for pid in orphans), timeout=5,
                 what="the leftovers gone")
        ledger = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
        killed = [e for e in ledger if e["event"] == "run_leftovers_killed"]
        assert [p["pid"] for p in killed[0]["processes"]] == [orphans[1]]
    finally:
        for pid in orphans or ():
            try:
                psutil.Process(pid).kill()
            except psutil.Error:
                pass
