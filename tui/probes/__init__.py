"""Samplers of the machine the campaign runs on: GPUs (NVML) and host load.

The control room samples about once a second in a worker thread; the engine
writes one ``ProbeSample.to_dict()`` per 10 s as a JSON line into a run's raw
measurements. Sampling never raises; pynvml is only imported inside the GPU
probe, so importing this package is safe on a box without NVIDIA software.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Mapping

from .gpu import NvmlProbe
from .gpu_snapshot import GpuDevice, GpuSnapshot, runs_on_devices
from .host import HostProbe, HostSample

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
