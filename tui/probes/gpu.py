"""NVML sampler for the GPU panel and the runs' raw measurements.

The control room calls ``NvmlProbe.sample()`` about once a second for days, so
the probe must be cheap and must never take the app down: pynvml is imported
lazily inside the probe, a box without a driver gives ``driver="missing"``, a
failing field gives None plus a ``problem`` line, and nothing raises out of
``sample()``. NVML is initialised once (a failed init is retried at most every
``retry_s`` seconds), device handles and the static uuid/name are cached per
index and fetched again only after that device had an error.
"""

from __future__ import annotations

import importlib
import threading
import time
from typing import Any, Callable

from .gpu_snapshot import GpuDevice, GpuSnapshot, runs_on_devices

__all__ = ["NvmlProbe", "GpuDevice", "GpuSnapshot", "runs_on_devices"]

# NVML return codes (same values as pynvml's NVML_ERROR_* constants).
_UNINITIALIZED = 1
_NOT_SUPPORTED = 3
_DRIVER_NOT_LOADED = 9
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_NOT_AVAILABLE = (_NOT_SUPPORTED, _FUNCTION_NOT_FOUND)

NO_DRIVER = "no NVIDIA driver: GPU panel unavailable"
LOST = "GPU is lost (fell off the bus); reboot or reset needed"


def _code(exc: BaseException) -> int | None:
    """The NVML return code of an ``NVMLError`` (or a lookalike), else None."""
    if type(exc).__name__.startswith("NVMLError"):
        value = getattr(exc, "value", None)
        return value if isinstance(value, int) else None
    return None


def _describe(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # a driver exception whose own message fails (pynvml calls the driver
        text = "(its message could not be read)"  # to spell it): said, not swallowed
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class _DeviceReader:
    """Reads the fields of one device, sorting failures into N/A, lost, problem."""

    def __init__(self, probe: NvmlProbe) -> None:
        self.probe = probe
        self.lost = False
        self.problems: list[str] = []

    def read(self, label: str, fn: Callable[[], Any]) -> Any:
        if self.lost:
            return None
        try:
            return fn()
        except Exception as exc:
            code = _code(exc)
            if code in _NOT_AVAILABLE:
                return None
            if code == _GPU_IS_LOST:
                self.lost = True
            else:
                if code == _UNINITIALIZED:
                    self.probe._ready = False
                self.problems.append(f"{label}: {_describe(exc)}")
            return None


class NvmlProbe:
    """Samples every GPU NVML sees; ``nvml`` injects a pynvml-like module."""

    def __init__(self, nvml: Any = None, *, retry_s: float = 60.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._nvml = nvml
        self._injected = nvml is not None
        self._retry_s = retry_s
        self._clock = clock
        self._lock = threading.Lock()
        self._ready = False
        self._failure: tuple[str, str] = ("missing", NO_DRIVER)
        self._next_try: float | None = None
        self._count: int | None = None
        self._handles: dict[int, Any] = {}
        self._static: dict[int, tuple[str | None, str | None]] = {}

    def sample(self, now: float | None = None) -> GpuSnapshot:
        t = time.time() if now is None else float(now)
        with self._lock:
            try:
                return self._sample(t)
            except Exception as exc:  # last resort: the panel shows it
                return GpuSnapshot(t, "error", f"GPU probe failed: {_describe(exc)}")

    def close(self) -> None:
        """Shut NVML down (if it was initialised); a later sample re-inits."""
        with self._lock:
            if self._ready:
                try:
                    self._nvml.nvmlShutdown()
                except self._nvml.NVMLError:  # a driver already gone: nothing left to close
                    pass
            self._ready = False
            self._next_try = None
            self._forget_devices()

    def __enter__(self) -> NvmlProbe:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals ---------------------------------------------------------

    def _forget_devices(self) -> None:
        self._count = None
        self._handles.clear()
        self._static.clear()

    def _sample(self, t: float) -> GpuSnapshot:
        if not self._ready and not self._init():
            return GpuSnapshot(t, *self._failure)
        nvml = self._nvml
        if self._count is None:
            try:
                self._count = int(nvml.nvmlDeviceGetCount())
            except Exception as exc:
                if _code(exc) == _UNINITIALIZED:
                    self._ready = False
                return GpuSnapshot(t, "error", f"cannot count GPUs: {_describe(exc)}")
        devices = tuple(self._read_device(i) for i in range(self._count))
        message = None if devices else "NVML reports no GPU"
        return GpuSnapshot(t, "ok", message, devices)

    def _init(self) -> bool:
        now = self._clock()
        if self._next_try is not None and now < self._next_try:
            return False
        try:
            if not self._injected:
                self._nvml = importlib.import_module("pynvml")
            self._nvml.nvmlInit()
        except ImportError as exc:
            self._failed(now, "missing", f"pynvml not importable ({_describe(exc)}): "
                                         "GPU panel unavailable")
            return False
        except Exception as exc:
            if _code(exc) in (_LIBRARY_NOT_FOUND, _DRIVER_NOT_LOADED):
                self._failed(now, "missing", f"{NO_DRIVER} ({_describe(exc)})")
            else:
                self._failed(now, "error", f"NVML init failed: {_describe(exc)}")
            return False
        self._ready = True
        self._next_try = None
        self._forget_devices()
        return True

    def _failed(self, now: float, driver: str, message: str) -> None:
        self._failure = (driver, message)
        self._next_try = now + self._retry_s

    def _read_device(self, index: int) -> GpuDevice:
        nvml = self._nvml
        handle = self._handles.get(index)
        if handle is None:
            try:
                handle = nvml.nvmlDeviceGetHandleByIndex(index)
            except Exception as exc:
                if _code(exc) == _GPU_IS_LOST:
                    return GpuDevice(index, state="lost", problem=LOST)
                return GpuDevice(index, state="error",
                                 problem=f"no handle: {_describe(exc)}")
            self._handles[index] = handle
        r = _DeviceReader(self)
        uuid, name = self._static.get(index, (None, None))
        if index not in self._static:
            uuid = r.read("uuid", lambda: _text(nvml.nvmlDeviceGetUUID(handle)))
            name = r.read("name", lambda: _text(nvml.nvmlDeviceGetName(handle)))
            if uuid is not None and name is not None:
                self._static[index] = (uuid, name)
        util = r.read("util", lambda: float(nvml.nvmlDeviceGetUtilizationRates(handle).gpu))
        mem = r.read("memory", lambda: _used_total(nvml.nvmlDeviceGetMemoryInfo(handle)))
        sensor = getattr(nvml, "NVML_TEMPERATURE_GPU", 0)
        temp = r.read("temp", lambda: float(nvml.nvmlDeviceGetTemperature(handle, sensor)))
        power = r.read("power", lambda: nvml.nvmlDeviceGetPowerUsage(handle) / 1000.0)
        pids: set[int] = set()
        for label, fn_name in (("compute pids", "nvmlDeviceGetComputeRunningProcesses"),
                               ("graphics pids", "nvmlDeviceGetGraphicsRunningProcesses")):
            procs = r.read(label, lambda f=fn_name: getattr(nvml, f)(handle))
            pids.update(int(p.pid) for p in procs or ())
        if r.lost or r.problems:  # fetch the handle again next time
            self._handles.pop(index, None)
            self._static.pop(index, None)
        if r.lost:
            return GpuDevice(index, uuid, name, state="lost", problem=LOST)
        used, total = mem or (None, None)
        return GpuDevice(
            index, uuid, name, state="ok", util_pct=util,
            mem_used_bytes=used, mem_total_bytes=total, temp_c=temp,
            power_w=power, pids=tuple(sorted(pids)),
            problem="; ".join(r.problems) or None,
        )



def _used_total(mem: Any) -> tuple[int, int]:
    return int(mem.used), int(mem.total)
