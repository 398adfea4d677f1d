"""The GPU probe as the control room sees it: values, N/A, lost GPUs, no driver."""

from __future__ import annotations

import json
import os
import sys

import pytest
from hypothesis import given, settings, strategies as st

try:
    from fake_pynvml import (DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, NO_PERMISSION,
                             UNKNOWN, FakeGpu, FakeNvml)
except ModuleNotFoundError:  # tests/ became a package
    from tests.fake_pynvml import (DRIVER_NOT_LOADED, LIBRARY_NOT_FOUND, NO_PERMISSION,
                                   UNKNOWN, FakeGpu, FakeNvml)

from tui.probes import GpuSnapshot, NvmlProbe

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


def test_the_real_pynvml_on_this_machine_never_crashes():
    probe = NvmlProbe()
    snap = probe.sample()
    probe.close()
    has_driver = os.path.exists("/dev/nvidiactl")
    assert snap.driver == ("ok" if has_driver else "missing"), snap.message
    if not has_driver:
        assert snap.devices == () and "no NVIDIA driver" in snap.message


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
    for _ in range(3):
        snap = probe.sample(now=1.0)
        assert GpuSnapshot.from_dict(json.loads(json.dumps(snap.to_dict()))) == snap
        assert snap.driver in ("ok", "missing", "error")
        assert all(d.state in ("ok", "lost", "error") for d in snap.devices)
