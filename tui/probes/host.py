"""Host load sampler: CPU, load average, RAM and free disk where the campaign writes.

A long campaign dies as often from a full disk or exhausted RAM as from a bad
loss, so the control room shows these next to the GPUs. The sample is cheap
(no blocking CPU measurement, a few syscalls) and never raises: a value that
cannot be read is None, a disk path that cannot be measured is left out.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Mapping

__all__ = ["HostProbe", "HostSample", "nearest_existing"]


@dataclass(frozen=True)
class HostSample:
    """The host at time ``t``. ``ram_used_bytes`` is total minus available."""

    t: float
    cpu_pct: float | None = None
    load1: float | None = None
    ram_used_bytes: int | None = None
    ram_total_bytes: int | None = None
    disk_free_bytes: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "t": self.t, "cpu_pct": self.cpu_pct, "load1": self.load1,
            "ram_used_bytes": self.ram_used_bytes,
            "ram_total_bytes": self.ram_total_bytes,
            "disk_free_bytes": dict(self.disk_free_bytes),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HostSample:
        return cls(
            t=float(data["t"]), cpu_pct=data.get("cpu_pct"), load1=data.get("load1"),
            ram_used_bytes=data.get("ram_used_bytes"),
            ram_total_bytes=data.get("ram_total_bytes"),
            disk_free_bytes={str(k): int(v)
                             for k, v in (data.get("disk_free_bytes") or {}).items()},
        )


def nearest_existing(path: str | os.PathLike) -> str:
    """``path`` itself if it exists, else its nearest existing parent."""
    current = os.path.abspath(os.fspath(path))
    while not os.path.exists(current):
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    return current


class HostProbe:
    """Samples the host; ``paths`` names the directories whose free space counts."""

    def __init__(self, paths: Mapping[str, str | os.PathLike] | None = None) -> None:
        import psutil  # here, not at the top: a room decoding a sample never samples

        self._paths = dict(paths or {})
        try:
            psutil.cpu_percent(None)  # prime: the first non-blocking call says 0.0
        except (psutil.Error, OSError):  # no /proc/stat: the first sample's CPU is then None
            pass

    def sample(self, now: float | None = None) -> HostSample:
        import psutil

        t = time.time() if now is None else float(now)
        cpu = _safe(lambda: float(psutil.cpu_percent(None)))
        load1 = _safe(lambda: float(os.getloadavg()[0]))
        memory = _safe(psutil.virtual_memory)
        used = total = None
        if memory is not None:
            total = int(memory.total)
            used = total - int(memory.available)
        disks: dict[str, int] = {}
        for name, path in self._paths.items():
            free = _safe(lambda p=path: int(psutil.disk_usage(nearest_existing(p)).free))
            if free is not None:
                disks[name] = free
        return HostSample(t, cpu, load1, used, total, disks)


def _safe(fn: Any) -> Any:
    """A field the host cannot give (a container without /proc/loadavg, a vanished mount)
    is None, shown as N/A, never an exception in the engine's tick."""
    import psutil

    try:
        return fn()
    except (psutil.Error, OSError, ValueError, AttributeError):
        return None
