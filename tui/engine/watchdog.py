"""Warnings from the probe samples that no single run event carries.

A GPU at ~0% for ten minutes while a run holds it (a stuck data loader, a dead
NCCL peer), a GPU that is lost, and free disk below what the next checkpoints
need. Each warning fires once when its condition starts and is re-armed when
it clears, so a three-day session stays calm. The engine feeds it every probe
sample (its own every 10 s, the control room's every second) and writes each
warning to the ledger, so warnings survive a restart and reach every face.
Works on duck-typed samples (see tui.probes): the engine never imports them.
"""

from __future__ import annotations

from ..campaign.units import human_duration

IDLE_AFTER_S = 600.0
IDLE_UTIL_PCT = 5.0


def run_devices(run) -> set[int]:
    """CUDA device indices a run was given (its CUDA_VISIBLE_DEVICES)."""
    return {int(p) for p in (run.devices or "").split(",") if p.strip().isdigit()}


def size_text(n: float | None) -> str:
    """Bytes for a warning: GB from 1 GB, MB below it, never a rounded-away `0.0G`."""
    if n is None:
        return "?"
    # each unit from where its rounded figure stops reading 1000 of the one below
    for at, scale, digits, unit in ((999.5e6, 1e9, 1, "GB"), (9.95e6, 1e6, 0, "MB"),
                                    (999.5e3, 1e6, 1, "MB"), (1e3, 1e3, 0, "kB")):
        if n >= at:
            return f"{n / scale:.{digits}f} {unit}"
    return f"{int(n)} bytes"


class Watchdog:
    def __init__(self, idle_after_s: float = IDLE_AFTER_S, idle_util_pct: float = IDLE_UTIL_PCT):
        self.idle_after_s = idle_after_s
        self.idle_util_pct = idle_util_pct
        self._idle_since: dict[int, float] = {}
        self._warned: set[str] = set()

    def _once(self, key: str, active: bool, message: str, out: list[str]) -> None:
        if active and key not in self._warned:
            self._warned.add(key)
            out.append(message)
        elif not active:
            self._warned.discard(key)

    def check(self, now: float, sample, running: list) -> list[str]:
        """New warnings for this sample; `running` are the RunStates alive now."""
        out: list[str] = []
        gpu = getattr(sample, "gpu", None)
        holders: dict[int, list[str]] = {}
        for run in running:
            for index in run_devices(run):
                holders.setdefault(index, []).append(run.id)
        devices = {d.index: d for d in (gpu.devices if gpu is not None else ())}
        for index in sorted(set(devices) | set(self._idle_since)):
            device = devices.get(index)
            runs = holders.get(index, [])
            idle = (device is not None and getattr(device, "state", "ok") == "ok" and bool(runs)
                    and device.util_pct is not None and device.util_pct < self.idle_util_pct)
            if idle:
                since = self._idle_since.setdefault(index, now)
            else:
                self._idle_since.pop(index, None)
                since = now
            self._once(f"idle:{index}", idle and now - since >= self.idle_after_s,
                       f"GPU {index} idle for {human_duration(now - since)} while "
                       f"{', '.join(runs)} is alive", out)
            lost = device is not None and getattr(device, "state", "ok") == "lost"
            self._once(f"lost:{index}", lost, f"GPU {index} is lost"
                       + (f" while {', '.join(runs)} is alive" if runs else ""), out)
        host = getattr(sample, "host", None)
        need = sum(max((c.bytes or 0) for c in r.checkpoints) if r.checkpoints else 0
                   for r in running)
        free = (host.disk_free_bytes or {}).get("state") if host is not None else None
        low = bool(need) and free is not None and free < need
        self._once("disk", low, f"free disk {size_text(free)} is below the "
                   f"{size_text(need)} the next checkpoints need", out)
        return out
