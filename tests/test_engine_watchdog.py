"""Idle-GPU and low-disk warnings from probe samples (stand-in NVML)."""

from types import SimpleNamespace as NS

from tui.engine.watchdog import Watchdog


def sample(util, free=10e9):
    gpu = NS(driver="ok", devices=(NS(index=0, util_pct=util), NS(index=1, util_pct=None)))
    return NS(gpu=gpu, host=NS(disk_free_bytes={"state": free}))


RUN = NS(id="control-abc-1", devices="0")


def test_gpu_idle_for_ten_minutes_under_a_live_run_warns_once():
    dog = Watchdog()
    assert dog.check(sample(0.0), [RUN], 0.0, None) == []
    assert dog.check(sample(0.0), [RUN], 599.0, None) == []
    (line,) = dog.check(sample(0.0), [RUN], 601.0, None)
    assert "GPU 0 idle for 10 min while run control-abc-1 is alive" in line
    assert dog.check(sample(0.0), [RUN], 700.0, None) == []  # not every sample


def test_busy_gpu_or_no_run_never_warns():
    dog = Watchdog()
    for t in range(0, 1300, 100):
        assert dog.check(sample(55.0), [RUN], float(t), None) == []
        assert dog.check(sample(0.0), [], float(t), None) == []


def test_disk_below_next_checkpoint_warns():
    dog = Watchdog()
    (line,) = dog.check(sample(50.0, free=1e9), [RUN], 0.0, next_checkpoint_bytes=900_000_000)
    assert line.startswith("disk: 1.0 GB free")
    assert dog.check(sample(50.0, free=5e9), [RUN], 10.0, 900_000_000) == []
