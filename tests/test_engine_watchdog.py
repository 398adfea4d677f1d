import pytest
"""Warnings from probe samples: idle GPU under a live run, lost GPU, low disk."""

from types import SimpleNamespace

from enginekit import printer_cmd, write_plan
from tui.engine.watching.watchdog import Watchdog
from tui.probes import GpuDevice, GpuSnapshot, ProbeSample
from tui.probes.host import HostSample

T0 = 1_764_500_000.0


def _sample(util, lost=False, free=None):
    dev = GpuDevice(0, state="lost" if lost else "ok", util_pct=util)
    return ProbeSample(GpuSnapshot(T0, "ok", None, (dev,)),
                       HostSample(T0, disk_free_bytes={} if free is None else {"state": free}))


def test_idle_gpu_warns_once_and_rearms_and_lost_gpu_warns():
    run = SimpleNamespace(id="r1", devices="0", checkpoints=())
    watch = Watchdog()
    assert watch.check(T0, _sample(0), [run]) == []
    assert watch.check(T0 + 599, _sample(0), [run]) == []
    assert watch.check(T0 + 600, _sample(0), [run]) == ["GPU 0 idle for 10 min while r1 is alive"]
    assert watch.check(T0 + 900, _sample(0), [run]) == []  # once
    assert watch.check(T0 + 901, _sample(80), [run]) == []
    assert watch.check(T0 + 902, _sample(0), []) == []  # no run on it: idle is fine
    assert watch.check(T0 + 903, _sample(None, lost=True), [run]) == ["GPU 0 is lost while r1 "
                                                                        "is alive"]


def test_disk_below_the_next_checkpoint_warns_once():
    run = SimpleNamespace(id="r1", devices="0", checkpoints=(SimpleNamespace(bytes=5 * 10**9),))
    watch = Watchdog()
    assert watch.check(T0, _sample(90, free=50 * 10**9), [run]) == []
    low = watch.check(T0 + 1, _sample(90, free=2 * 10**9), [run])
    assert low == ["free disk 2.0 GB is below the 5.0 GB the next checkpoints need"]
    assert watch.check(T0 + 2, _sample(90, free=2 * 10**9), [run]) == []


def test_disk_figures_below_one_gb_are_in_mb_never_a_rounded_zero():
    runs = [SimpleNamespace(id=f"r{i}", devices=str(i), checkpoints=(SimpleNamespace(bytes=600 * 10**6),))
            for i in (1, 2)]
    low = Watchdog().check(T0, _sample(90, free=312 * 10**6), runs)
    assert low == ["free disk 312 MB is below the 1.2 GB the next checkpoints need"]
    tiny = SimpleNamespace(id="r3", devices="0", checkpoints=(SimpleNamespace(bytes=4_300_000),))
    full = Watchdog().check(T0, _sample(90, free=0), [tiny])
    assert full == ["free disk 0 bytes is below the 4.3 MB the next checkpoints need"]


def test_engine_records_probe_warnings_in_the_ledger(tmp_path):
    from fakeprocs import FakeClock, FakeProcesses
    from tui.campaign import load_plan
    from tui.engine import Engine, read_ledger

    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "2000", "--sleep", "0.01")}
    minutes = 1
    """)
    clock = FakeClock()  # the engine's fake processes (tests/fakeprocs.py): none started
    engine = Engine(load_plan(path), idle_after_s=0.0, clock=clock.wall, monotonic=clock.mono,
                    processes=FakeProcesses(clock)).open()
    try:
        engine.tick()  # launches on lane 0 (CUDA_VISIBLE_DEVICES=0)
        assert engine.observe_probe(_sample(0)) == [
            f"GPU 0 idle for 0 s while {engine.state.running[0].id} is alive"]
        engine.stop_run(engine.state.running[0].id, "test over")
    finally:
        engine.close()
    warnings = [e for e in read_ledger(tmp_path / ".itera/ledger.jsonl") if e["event"] == "warning"]
    assert len(warnings) == 1 and "GPU 0 idle" in warnings[0]["message"]


def test_compute_processes_left_on_a_gpu_after_its_run_ended_are_named_once():
    import os

    ended = SimpleNamespace(id="r1", devices="0", checkpoints=())
    other = SimpleNamespace(id="r2", devices="0", checkpoints=())
    watch = Watchdog()
    left = os.getpid()  # a real pid, so its name is read as on a real box

    def on_gpu(*pids):
        dev = GpuDevice(0, state="ok", util_pct=30, pids=pids)
        return ProbeSample(GpuSnapshot(T0, "ok", None, (dev,)), HostSample(T0))

    assert watch.check(T0, on_gpu(left), [other], [ended]) == []  # a live run holds it
    said = watch.check(T0 + 1, on_gpu(left), [], [ended])
    assert len(said) == 1 and said[0].startswith(f"GPU 0 still runs pid {left} (")
    assert said[0].endswith("after r1 ended (no live run holds this GPU)")
    assert watch.check(T0 + 2, on_gpu(left), [], [ended]) == []  # once
    assert watch.check(T0 + 3, on_gpu(), [], [ended]) == []  # it has gone
    assert watch.check(T0 + 4, on_gpu(left), [], []) == []  # no run ever held it: not ours
