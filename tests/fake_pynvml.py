"""A stand-in for the pynvml module, so the GPU probe is tested without a GPU.

It raises the real pynvml error classes (``pynvml.NVMLError(code)`` maps to
``NVMLError_NotSupported`` and friends), so the probe is exercised against the
exceptions it will meet on a real box. Each test configures the GPUs it needs:
how many, which field is unsupported or failing, a lost GPU, no driver, the
processes on a device. ``calls`` counts every API call by name.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

import pynvml

NVMLError = pynvml.NVMLError
NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU
NOT_SUPPORTED = pynvml.NVML_ERROR_NOT_SUPPORTED
GPU_IS_LOST = pynvml.NVML_ERROR_GPU_IS_LOST
LIBRARY_NOT_FOUND = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
DRIVER_NOT_LOADED = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
UNKNOWN = pynvml.NVML_ERROR_UNKNOWN
NO_PERMISSION = pynvml.NVML_ERROR_NO_PERMISSION


@dataclass
class FakeGpu:
    """One GPU. ``unsupported``: field names that raise NotSupported;
    ``errors``: field name -> NVML code or exception instance to raise."""

    name: str = "NVIDIA RTX 4090"
    uuid: str = "GPU-00000000"
    util: int = 37
    mem_used: int = 3 * 2**30
    mem_total: int = 24 * 2**30
    temp: int = 61
    power_mw: int = 212_500
    compute_pids: list[int] = field(default_factory=list)
    graphics_pids: list[int] = field(default_factory=list)
    unsupported: set[str] = field(default_factory=set)
    errors: dict[str, object] = field(default_factory=dict)
    lost: bool = False


class FakeNvml:
    """Imitates the pynvml functions the probe uses.

    ``init_error``: an NVML code (or exception) raised by nvmlInit.
    Field names for ``unsupported``/``errors``: uuid, name, util, memory,
    temp, power, compute, graphics, handle.
    """

    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    def __init__(self, gpus: list[FakeGpu] | None = None, init_error: object = None,
                 bytes_strings: bool = False) -> None:
        self.gpus = list(gpus if gpus is not None else [FakeGpu()])
        self.init_error = init_error
        self.bytes_strings = bytes_strings  # old pynvml returned bytes
        self.calls: Counter[str] = Counter()
        self.initialised = False

    # -- helpers -----------------------------------------------------------

    @staticmethod
    def _raise(error: object) -> None:
        raise error if isinstance(error, BaseException) else pynvml.NVMLError(error)

    def _gpu(self, handle: object, what: str) -> FakeGpu:
        self.calls[what] += 1
        if not self.initialised:
            self._raise(pynvml.NVML_ERROR_UNINITIALIZED)
        gpu = self.gpus[handle.index]
        if gpu.lost:
            self._raise(GPU_IS_LOST)
        if what in gpu.unsupported:
            self._raise(NOT_SUPPORTED)
        if what in gpu.errors:
            self._raise(gpu.errors[what])
        return gpu

    def _str(self, value: str) -> str | bytes:
        return value.encode() if self.bytes_strings else value

    # -- the pynvml API surface ----------------------------------------------

    def nvmlInit(self) -> None:
        self.calls["init"] += 1
        if self.init_error is not None:
            self._raise(self.init_error)
        self.initialised = True

    def nvmlShutdown(self) -> None:
        self.calls["shutdown"] += 1
        self.initialised = False

    def nvmlDeviceGetCount(self) -> int:
        self.calls["count"] += 1
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimpleNamespace:
        handle = SimpleNamespace(index=index)
        self._gpu(handle, "handle")
        return handle

    def nvmlDeviceGetUUID(self, handle):
        return self._str(self._gpu(handle, "uuid").uuid)

    def nvmlDeviceGetName(self, handle):
        return self._str(self._gpu(handle, "name").name)

    def nvmlDeviceGetUtilizationRates(self, handle):
        gpu = self._gpu(handle, "util")
        return SimpleNamespace(gpu=gpu.util, memory=gpu.util // 2)

    def nvmlDeviceGetMemoryInfo(self, handle, version=None):
        gpu = self._gpu(handle, "memory")
        return SimpleNamespace(used=gpu.mem_used, total=gpu.mem_total,
                               free=gpu.mem_total - gpu.mem_used)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        return self._gpu(handle, "temp").temp

    def nvmlDeviceGetPowerUsage(self, handle):
        return self._gpu(handle, "power").power_mw

    def nvmlDeviceGetComputeRunningProcesses(self, handle):
        gpu = self._gpu(handle, "compute")
        return [SimpleNamespace(pid=p, usedGpuMemory=2**30) for p in gpu.compute_pids]

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle):
        gpu = self._gpu(handle, "graphics")
        return [SimpleNamespace(pid=p, usedGpuMemory=None) for p in gpu.graphics_pids]
