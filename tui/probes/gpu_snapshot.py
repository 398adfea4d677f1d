"""Frozen records of one NVML sample, and which run owns which GPU.

They live apart from the sampler so that views, the ledger replay and the
bundle report can read a stored sample (``GpuSnapshot.from_dict``) without
touching pynvml, nor psutil (only ``runs_on_devices`` walks processes: the room
decodes the engine's samples before its first paint). ``None`` in a field means
"not available" (shown as N/A): the GPU does not support it, or reading it failed
(then ``problem`` says why).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

DEVICE_STATES = ("ok", "lost", "error")
DRIVER_STATES = ("ok", "missing", "error")


@dataclass(frozen=True)
class GpuDevice:
    """One GPU as seen in one sample.

    ``state`` is "ok", "lost" (NVML says the GPU fell off the bus) or "error"
    (no handle could be had). A field that failed on an otherwise "ok" device
    is None and ``problem`` names it.
    """

    index: int
    uuid: str | None = None
    name: str | None = None
    state: str = "ok"
    util_pct: float | None = None
    mem_used_bytes: int | None = None
    mem_total_bytes: int | None = None
    temp_c: float | None = None
    power_w: float | None = None
    pids: tuple[int, ...] = ()
    problem: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index, "uuid": self.uuid, "name": self.name,
            "state": self.state, "util_pct": self.util_pct,
            "mem_used_bytes": self.mem_used_bytes,
            "mem_total_bytes": self.mem_total_bytes, "temp_c": self.temp_c,
            "power_w": self.power_w, "pids": list(self.pids),
            "problem": self.problem,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuDevice:
        return cls(
            index=int(data["index"]), uuid=data.get("uuid"), name=data.get("name"),
            state=data.get("state", "ok"), util_pct=data.get("util_pct"),
            mem_used_bytes=data.get("mem_used_bytes"),
            mem_total_bytes=data.get("mem_total_bytes"),
            temp_c=data.get("temp_c"), power_w=data.get("power_w"),
            pids=tuple(int(p) for p in data.get("pids", ())),
            problem=data.get("problem"),
        )


@dataclass(frozen=True)
class GpuSnapshot:
    """All GPUs at time ``t``; ``driver`` is "ok", "missing" or "error"."""

    t: float
    driver: str
    message: str | None = None
    devices: tuple[GpuDevice, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "t": self.t, "driver": self.driver, "message": self.message,
            "devices": [d.to_dict() for d in self.devices],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> GpuSnapshot:
        return cls(
            t=float(data["t"]), driver=data.get("driver", "error"),
            message=data.get("message"),
            devices=tuple(GpuDevice.from_dict(d) for d in data.get("devices", ())),
        )


def runs_on_devices(snapshot: GpuSnapshot,
                    run_pids: Mapping[str, int]) -> dict[int, list[str]]:
    """Map each device index to the ids of the runs using it (sorted).

    A GPU process belongs to a run when it is the run's pid or one of its
    descendants. Every device of the snapshot is a key (an idle one maps to
    ``[]``). Processes that vanished or cannot be inspected are skipped. In a
    container NVML may report host pids, which then match no run.
    """
    owner = {int(pid): run_id for run_id, pid in run_pids.items()}
    found: dict[int, set[str]] = {d.index: set() for d in snapshot.devices}
    cache: dict[int, str | None] = {}
    for device in snapshot.devices:
        for pid in device.pids:
            if pid not in cache:
                cache[pid] = _owning_run(pid, owner)
            if cache[pid] is not None:
                found[device.index].add(cache[pid])
    return {index: sorted(runs) for index, runs in found.items()}


def _owning_run(pid: int, owner: Mapping[int, str]) -> str | None:
    if pid in owner:
        return owner[pid]
    if not owner:
        return None
    import psutil  # here, not at the top: the room decodes snapshots, never walks processes

    try:
        for parent in psutil.Process(pid).parents():
            if parent.pid in owner:
                return owner[parent.pid]
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return None
    except (OSError, ValueError):
        return None
    return None
