"""Host sampling, the combined probe record, and which run owns which GPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psutil
import pytest

try:
    from fake_pynvml import FakeGpu, FakeNvml
except ModuleNotFoundError:  # tests/ became a package
    from tests.fake_pynvml import FakeGpu, FakeNvml

from tui.probes import (GpuDevice, GpuSnapshot, HostProbe, HostSample, NvmlProbe,
                        ProbeSample, Probes, runs_on_devices)
from tui.probes.host import nearest_existing


def test_host_sample_with_real_paths(tmp_path):
    missing = tmp_path / "outputs" / "not" / "yet"
    probe = HostProbe({"state": tmp_path, "outputs": missing})
    sample = probe.sample(now=42.0)
    assert sample.t == 42.0
    assert 0.0 <= sample.cpu_pct <= 100.0 and sample.load1 >= 0.0
    assert 0 < sample.ram_used_bytes <= sample.ram_total_bytes
    free = psutil.disk_usage(str(tmp_path)).free
    assert set(sample.disk_free_bytes) == {"state", "outputs"}
    for value in sample.disk_free_bytes.values():  # same filesystem, same order
        assert abs(value - free) < 1 << 30
    assert nearest_existing(missing) == str(tmp_path)


def test_host_sample_round_trips_and_defaults_to_wall_clock(tmp_path):
    sample = HostProbe({"here": tmp_path}).sample()
    assert sample.t > 1.6e9
    assert HostSample.from_dict(json.loads(json.dumps(sample.to_dict()))) == sample


def test_probes_write_one_json_line_with_both_parts(tmp_path):
    probes = Probes(NvmlProbe(FakeNvml([FakeGpu(compute_pids=[5])])),
                    HostProbe({"state": tmp_path}))
    record = probes.sample(now=100.0)
    probes.close()
    assert record.gpu.t == record.host.t == 100.0
    line = json.dumps(record.to_dict())
    assert "\n" not in line
    assert ProbeSample.from_dict(json.loads(line)) == record


CHILD = """
import subprocess, sys, time
grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(grandchild.pid, flush=True)
time.sleep(60)
"""


@pytest.fixture
def process_tree():
    """A run process with one grandchild: (run pid, grandchild pid)."""
    child = subprocess.Popen([sys.executable, "-c", CHILD], stdout=subprocess.PIPE, text=True)
    grandchild = int(child.stdout.readline())
    yield child.pid, grandchild
    for pid in (grandchild, child.pid):
        try:
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:
            pass
    child.wait(timeout=10)


@pytest.mark.slow
def test_runs_on_devices_follows_descendants(process_tree):
    run_pid, grandchild = process_tree
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    snap = GpuSnapshot(1.0, "ok", None, (
        GpuDevice(0, pids=(grandchild,)),
        GpuDevice(1, pids=(run_pid, os.getpid(), gone.pid)),
        GpuDevice(2, pids=(os.getpid(),)),
        GpuDevice(3),
    ))
    owners = runs_on_devices(snap, {"ctrl-ab12-1": run_pid, "var-cd34-1": gone.pid})
    assert owners == {0: ["ctrl-ab12-1"], 1: ["ctrl-ab12-1", "var-cd34-1"], 2: [], 3: []}


def test_runs_on_devices_without_runs_or_driver():
    assert runs_on_devices(GpuSnapshot(1.0, "missing", "no driver"), {"r": 1}) == {}
    assert runs_on_devices(GpuSnapshot(1.0, "ok", None, (GpuDevice(0, pids=(1,)),)), {}) == {0: []}
