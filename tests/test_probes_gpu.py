"""The GPU probe as the control room sees it: values, N/A, lost GPUs, no driver.

A fake pynvml drives every case here; the tests named `on_a_gpu_box` run the real
NVML where a driver is (skipped elsewhere, saying what they need) and check real
figures: utilisation in 0..100, memory used within total, the GPUs nvidia-smi lists,
and a CUDA process the test starts seen in NVML's process list.
"""

from __future__ import annotations

import importlib.util
import json
import os
import select
import shutil
import subprocess
import sys
import time

import psutil
import pytest
from hypothesis import given, settings, strategies as st

try:
    from fake_pynvml import (DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, NO_PERMISSION,
                             UNKNOWN, FakeGpu, FakeNvml)
except ModuleNotFoundError:  # tests/ became a package
    from tests.fake_pynvml import (DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, NO_PERMISSION,
                                   UNKNOWN, FakeGpu, FakeNvml)

from tui.probes import GpuSnapshot, NvmlProbe, runs_on_devices

FIELDS = ["uuid", "name", "util", "memory", "temp", "power", "compute", "graphics"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_supported_fields_are_reported_in_user_units():
    fake = FakeNvml([FakeGpu(uuid="GPU-a", compute_pids=[11, 12], graphics_pids=[12]),
                     FakeGpu(uuid="GPU-b", util=0)])
    snap = NvmlProbe(fake).sample(now=5.0)
    assert snap.t == 5.0 and snap.driver == "ok" and snap.message is None
    first, second = snap.devices
    assert first.index == 0 and first.uuid == "GPU-a" and first.name == "NVIDIA RTX 4090"
    assert first.state == "ok" and first.problem is None
    assert first.util_pct == 37.0
    assert first.mem_used_bytes == 3 * 2**30 and first.mem_total_bytes == 24 * 2**30
    assert first.temp_c == 61.0 and first.power_w == pytest.approx(212.5)
    assert first.pids == (11, 12)
    assert second.uuid == "GPU-b" and second.util_pct == 0.0 and second.pids == ()


def test_old_pynvml_bytes_names_are_decoded():
    snap = NvmlProbe(FakeNvml([FakeGpu(uuid="GPU-x")], bytes_strings=True)).sample()
    assert snap.devices[0].uuid == "GPU-x" and snap.devices[0].name == "NVIDIA RTX 4090"


def test_unsupported_fields_are_none_without_a_problem():
    fake = FakeNvml([FakeGpu(unsupported={"power", "temp", "util", "graphics"},
                             compute_pids=[7])])
    dev = NvmlProbe(fake).sample().devices[0]
    assert dev.state == "ok" and dev.problem is None
    assert dev.power_w is None and dev.temp_c is None and dev.util_pct is None
    assert dev.mem_total_bytes == 24 * 2**30 and dev.pids == (7,)


def test_a_failing_field_is_none_and_named_in_problem():
    fake = FakeNvml([FakeGpu(errors={"power": UNKNOWN, "temp": RuntimeError("boom")})])
    dev = NvmlProbe(fake).sample().devices[0]
    assert dev.state == "ok" and dev.power_w is None and dev.temp_c is None
    assert dev.util_pct == 37.0
    assert "power: NVMLError_Unknown" in dev.problem and "temp: RuntimeError: boom" in dev.problem


def test_a_lost_gpu_is_marked_lost_and_the_others_still_read():
    fake = FakeNvml([FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b")])
    probe = NvmlProbe(fake)
    probe.sample()
    fake.gpus[1].lost = True
    a, b = probe.sample().devices
    assert a.state == "ok" and a.util_pct == 37.0
    assert b.state == "lost" and b.util_pct is None and "lost" in b.problem
    assert b.uuid == "GPU-b"  # known from before it was lost
    fake.gpus[1].lost = False  # e.g. after a reset
    assert probe.sample().devices[1].state == "ok"


def test_lost_when_even_the_handle_cannot_be_had():
    fake = FakeNvml([FakeGpu(lost=True)])
    dev = NvmlProbe(fake).sample().devices[0]
    assert dev.state == "lost" and dev.uuid is None


def test_handle_failure_other_than_lost_is_an_error_device():
    fake = FakeNvml([FakeGpu(errors={"handle": NO_PERMISSION})])
    dev = NvmlProbe(fake).sample().devices[0]
    assert dev.state == "error" and "Insufficient Permissions" in dev.problem


@pytest.mark.parametrize("error", [LIBRARY_NOT_FOUND, DRIVER_NOT_LOADED])
def test_no_driver_is_missing_with_a_clear_message(error):
    snap = NvmlProbe(FakeNvml(init_error=error)).sample()
    assert snap.driver == "missing" and snap.devices == ()
    assert "no NVIDIA driver: GPU panel unavailable" in snap.message


def test_pynvml_not_importable_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    snap = NvmlProbe().sample()
    assert snap.driver == "missing" and "pynvml not importable" in snap.message


def test_other_init_failure_is_a_driver_error():
    snap = NvmlProbe(FakeNvml(init_error=NO_PERMISSION)).sample()
    assert snap.driver == "error" and "NVML init failed" in snap.message


HAS_DRIVER = os.path.exists("/dev/nvidiactl") or shutil.which("nvidia-smi") is not None
NEEDS_A_GPU = ("needs an NVIDIA GPU box (a driver: /dev/nvidiactl or nvidia-smi, and "
               "pynvml): it reads real utilisation, memory and processes through NVML")


@pytest.mark.skipif(HAS_DRIVER, reason="this box has an NVIDIA driver: see the GPU-box tests")
def test_without_a_driver_the_real_pynvml_says_missing():
    with NvmlProbe() as probe:
        snap = probe.sample()
    assert snap.driver == "missing" and snap.devices == (), snap
    assert "no NVIDIA driver: GPU panel unavailable" in snap.message


@pytest.mark.slow  # asks nvidia-smi too: the fast loop starts no process
@pytest.mark.skipif(not HAS_DRIVER, reason=NEEDS_A_GPU)
def test_on_a_gpu_box_the_real_nvml_reads_real_figures():
    with NvmlProbe() as probe:
        snap = probe.sample()
        again = probe.sample()
    assert snap.driver == "ok" and snap.message is None, snap.message
    assert snap.devices, "NVML reports no GPU"
    for dev in snap.devices + again.devices:
        assert dev.state == "ok" and dev.problem is None, dev
        assert dev.uuid.startswith("GPU-") and dev.name, dev
        # N/A (None, no problem) only where NVML does not support it, e.g. a MIG-split GPU
        assert dev.util_pct is None or 0.0 <= dev.util_pct <= 100.0, dev
        assert dev.mem_total_bytes > 0 and 0 <= dev.mem_used_bytes <= dev.mem_total_bytes, dev
        assert dev.temp_c is None or 0.0 < dev.temp_c < 130.0, dev
        assert dev.power_w is None or 0.0 <= dev.power_w < 5000.0, dev
    assert [d.uuid for d in again.devices] == [d.uuid for d in snap.devices]
    assert any(d.util_pct is not None for d in snap.devices), "no GPU reports utilisation"
    if shutil.which("nvidia-smi"):  # the same GPUs as the driver's own tool lists
        smi = subprocess.run(["nvidia-smi", "--query-gpu=uuid,name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=60, check=True)
        listed = sorted(tuple(f.strip() for f in line.split(",", 1))
                        for line in smi.stdout.splitlines() if line.strip())
        assert sorted((d.uuid, d.name) for d in snap.devices) == listed


CUDA_CHILD = """
import sys, torch
if not torch.cuda.is_available():
    print("no-cuda", flush=True)
    sys.exit(0)
held = torch.empty(64 * 2**20, dtype=torch.float32, device="cuda")  # 256 MiB
torch.cuda.synchronize()
print("ready", flush=True)
sys.stdin.readline()  # hold the GPU until the test is done looking
"""


def read_line(stream, timeout: float) -> str:
    ready, _, _ = select.select([stream], [], [], timeout)
    return stream.readline().strip() if ready else "(nothing within the timeout)"


@pytest.mark.slow
@pytest.mark.skipif(not HAS_DRIVER, reason=NEEDS_A_GPU + " and torch with CUDA")
def test_on_a_gpu_box_a_cuda_process_of_the_test_is_seen_on_its_gpu():
    if importlib.util.find_spec("torch") is None:
        pytest.skip("torch is not installed: " + NEEDS_A_GPU + " and torch with CUDA")
    with NvmlProbe() as probe:
        before = {p for d in probe.sample().devices for p in d.pids}
        child = subprocess.Popen([sys.executable, "-c", CUDA_CHILD], stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)
        try:
            said = read_line(child.stdout, timeout=300)  # CUDA start-up, a hang guard
            if said == "no-cuda":
                pytest.skip("torch.cuda is not available here: " + NEEDS_A_GPU)
            assert said == "ready", f"the CUDA child did not start: {said!r}"
            deadline = time.monotonic() + 30  # NVML lists a new context within a second
            while True:
                snap = probe.sample()
                seen = {p for d in snap.devices for p in d.pids}
                # in a PID namespace (a container) NVML lists host pids, unknown in here
                foreign = {p for p in seen - before if not psutil.pid_exists(p)}
                if child.pid in seen or foreign or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            assert child.pid in seen or foreign, \
                f"the CUDA child {child.pid} is not in NVML's process list {sorted(seen)}"
            assert max(d.mem_used_bytes for d in snap.devices) >= 256 * 2**20
            if child.pid in seen:
                (index,) = [d.index for d in snap.devices if child.pid in d.pids]
                assert runs_on_devices(snap, {"probe-child": child.pid})[index] == ["probe-child"]
        finally:
            child.stdin.close()
            try:
                child.wait(timeout=60)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


def test_failed_init_is_retried_at_most_every_60_s():
    clock = FakeClock()
    fake = FakeNvml(init_error=DRIVER_NOT_LOADED)
    probe = NvmlProbe(fake, clock=clock)
    for _ in range(5):
        assert probe.sample().driver == "missing"
    assert fake.calls["init"] == 1
    clock.now += 59
    probe.sample()
    assert fake.calls["init"] == 1
    fake.init_error = None  # the driver came up
    clock.now += 1
    assert probe.sample().driver == "ok" and fake.calls["init"] == 2


def test_init_once_handles_cached_and_refetched_only_after_an_error():
    fake = FakeNvml([FakeGpu(), FakeGpu()])
    probe = NvmlProbe(fake)
    for _ in range(10):
        probe.sample()
    assert fake.calls["init"] == 1 and fake.calls["count"] == 1
    assert fake.calls["handle"] == 2 and fake.calls["uuid"] == 2
    fake.gpus[1].errors["power"] = UNKNOWN
    probe.sample()  # the error drops device 1's handle
    del fake.gpus[1].errors["power"]
    probe.sample()
    probe.sample()
    assert fake.calls["handle"] == 3 and fake.calls["init"] == 1


def test_close_shuts_nvml_down_and_a_later_sample_reinits():
    fake = FakeNvml()
    with NvmlProbe(fake) as probe:
        probe.sample()
    assert fake.calls["shutdown"] == 1
    assert probe.sample().driver == "ok" and fake.calls["init"] == 2
    NvmlProbe(FakeNvml(init_error=LIBRARY_NOT_FOUND)).close()  # nothing to shut


def test_snapshot_round_trips_through_a_json_line():
    fake = FakeNvml([FakeGpu(compute_pids=[3]), FakeGpu(unsupported={"power"}),
                     FakeGpu(lost=True)])
    snap = NvmlProbe(fake).sample(now=12.5)
    line = json.dumps(snap.to_dict())
    assert GpuSnapshot.from_dict(json.loads(line)) == snap


class Exploding:
    """A broken 'pynvml': every attribute access raises."""

    def __getattr__(self, name):
        raise ValueError(f"broken module: {name}")


def test_sample_never_raises_even_with_a_broken_module():
    snap = NvmlProbe(Exploding()).sample()
    assert snap.driver == "error" and "broken module" in snap.message


_errors = st.sampled_from([None, 3, 15, 999, 4, 1, RuntimeError("x"), KeyError("k")])


@settings(max_examples=150, deadline=None)
@given(st.lists(st.dictionaries(st.sampled_from(FIELDS + ["handle"]), _errors, max_size=5),
                min_size=0, max_size=3),
       st.sampled_from([None, 9, 12, 999, 1]))
def test_sample_never_raises_whatever_fails(per_gpu, init_error):
    gpus = [FakeGpu(errors={k: v for k, v in errs.items() if v is not None})
            for errs in per_gpu]
    probe = NvmlProbe(FakeNvml(gpus, init_error=init_error))
    # what a person should read: no driver (9, 12) is "missing", another init failure an
    # error; a device whose handle or any field says 15 is lost, another handle failure
    # an error, anything else on a field leaves the device ok (that field N/A or named)
    driver = "ok" if init_error is None else "missing" if init_error in (9, 12) else "error"
    states = [("lost" if errs.get("handle") == 15 else "error") if errs.get("handle")
              is not None else "lost" if 15 in errs.values() else "ok" for errs in per_gpu]
    for _ in range(3):
        snap = probe.sample(now=1.0)
        assert GpuSnapshot.from_dict(json.loads(json.dumps(snap.to_dict()))) == snap
        assert snap.driver == driver
        assert [d.state for d in snap.devices] == (states if driver == "ok" else [])
