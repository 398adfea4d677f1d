"""Warnings from the probe samples: an idle GPU under a live run, a disk too full.

A GPU at 0% for ten minutes while a run holds it usually means a stuck data
loader or a dead rank; a disk with less free space than the next checkpoint
needs means the next save will fail. Both are worth a line in the events log
long before they cost a day. Works on duck-typed samples (see tui.probes) so
the engine never imports the probes package.
"""

from __future__ import annotations

IDLE_SECONDS = 600.0
IDLE_UTIL_PCT = 1.0
DISK_MARGIN = 1.2
REPEAT_SECONDS = 3600.0


class Watchdog:
    def __init__(self, idle_seconds: float = IDLE_SECONDS):
        self.idle_seconds = idle_seconds
        self._idle_since: dict[int, float] = {}
        self._last_warned: dict[str, float] = {}

    def _once(self, key: str, now: float) -> bool:
        last = self._last_warned.get(key)
        if last is not None and now - last < REPEAT_SECONDS:
            return False
        self._last_warned[key] = now
        return True

    def check(self, sample, running: list, now: float, next_checkpoint_bytes: int | None
              ) -> list[str]:
        """Warning lines for this sample. `running` are RunState objects."""
        out = []
        gpu = getattr(sample, "gpu", None)
        held: dict[int, str] = {}
        for run in running:
            for dev in (run.devices or "").split(","):
                if dev.strip().isdigit():
                    held[int(dev)] = run.id
        if gpu is not None and gpu.driver == "ok":
            for device in gpu.devices:
                util = device.util_pct
                if device.index not in held or util is None or util >= IDLE_UTIL_PCT:
                    self._idle_since.pop(device.index, None)
                    continue
                since = self._idle_since.setdefault(device.index, now)
                if now - since >= self.idle_seconds and self._once(f"idle{device.index}", now):
                    out.append(f"GPU {device.index} idle for {(now - since) / 60:.0f} min while "
                               f"run {held[device.index]} is alive")
        host = getattr(sample, "host", None)
        free = (host.disk_free_bytes or {}).get("state") if host is not None else None
        if free is not None and next_checkpoint_bytes and running \
                and free < next_checkpoint_bytes * DISK_MARGIN and self._once("disk", now):
            out.append(f"disk: {free / 1e9:.1f} GB free, below the "
                       f"{next_checkpoint_bytes * DISK_MARGIN / 1e9:.1f} GB the next checkpoint "
                       "needs")
        return out
