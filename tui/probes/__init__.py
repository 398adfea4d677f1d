"""Samplers of the machine the campaign runs on: GPUs (NVML) and host load.

The control room samples about once a second in a worker thread; the engine
writes one ``ProbeSample.to_dict()`` per 10 s as a JSON line into a run's raw
measurements. Sampling never raises; pynvml is only imported inside the GPU
probe, so importing this package is safe on a box without NVIDIA software.

The samplers and records load on first use (`tui.lazy`): the room decodes the
engine's samples (`gpu_snapshot`, `host`) and never samples, so its first paint
pays for neither the NVML sampler nor psutil.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .gpu import NvmlProbe
    from .gpu_snapshot import GpuDevice, GpuSnapshot, runs_on_devices
    from .host import HostProbe, HostSample

__getattr__ = lazy_exports(__name__, globals(), {
    "NvmlProbe": "gpu", "GpuDevice": "gpu_snapshot", "GpuSnapshot": "gpu_snapshot",
    "runs_on_devices": "gpu_snapshot", "HostProbe": "host", "HostSample": "host"})

__all__ = [
    "GpuDevice", "GpuSnapshot", "HostProbe", "HostSample", "NvmlProbe",
    "ProbeSample", "Probes", "runs_on_devices",
]


@dataclass(frozen=True)
class ProbeSample:
    """One GPU snapshot and one host sample taken at the same ``now``."""

    gpu: GpuSnapshot
    host: HostSample

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu.to_dict(), "host": self.host.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProbeSample:
        from .gpu_snapshot import GpuSnapshot
        from .host import HostSample

        return cls(GpuSnapshot.from_dict(data["gpu"]), HostSample.from_dict(data["host"]))


class Probes:
    """The GPU and host probes sampled together."""

    def __init__(self, gpu: NvmlProbe, host: HostProbe) -> None:
        self.gpu = gpu
        self.host = host

    def sample(self, now: float | None = None) -> ProbeSample:
        t = time.time() if now is None else float(now)
        return ProbeSample(self.gpu.sample(t), self.host.sample(t))

    def close(self) -> None:
        self.gpu.close()
