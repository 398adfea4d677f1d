"""Warnings from the probe samples that no single run event carries.

A GPU at ~0% for ten minutes while a run holds it (a stuck data loader, a dead
NCCL peer), a GPU that is lost, free disk below what the next checkpoints
need, and compute processes still on a GPU after the run that held it ended
(NVML's process list on a lane no live run holds: what a run left behind
keeps its GPU memory and its share of the card). Each warning fires once when its condition starts and is re-armed when
it clears, so a three-day session stays calm. The engine feeds it every probe
sample (its own every 10 s, the control room's every second) and writes each
warning to the ledger, so warnings survive a restart and reach every face.
Works on duck-typed samples (see tui.probes): the engine never imports them.
"""

from __future__ import annotations

import psutil

from ...campaign.units import human_duration

IDLE_AFTER_S = 600.0
IDLE_UTIL_PCT = 5.0


def run_devices(run) -> set[int]:
    """CUDA device indices a run was given (its CUDA_VISIBLE_DEVICES)."""
    return {int(p) for p in (run.devices or "").split(",") if p.strip().isdigit()}


def run_utils(run, sample, pids: set[int]) -> tuple[float | None, ...]:
    """The utilisation NVML gives for each of the run's own GPUs in `sample`: the devices
    its lanes gave it (CUDA_VISIBLE_DEVICES) and any device whose process list NVML gives
    names one of its processes (`pids`: the launcher and its descendants), so a script
    that picked another GPU is judged on the GPU it holds. None for a GPU of the run
    that is absent, lost or without a figure (the `gpu_idle` rule judges no such sample);
    () when the sample has no GPU of the run (a CPU box, no driver)."""
    gpu = getattr(sample, "gpu", None)
    devices = {d.index: d for d in (gpu.devices if gpu is not None else ())}
    if not devices:
        return ()
    mine = run_devices(run) | {index for index, d in devices.items()
                               if pids.intersection(getattr(d, "pids", ()) or ())}
    utils = []
    for index in sorted(mine):
        device = devices.get(index)
        ok = device is not None and getattr(device, "state", "ok") == "ok"
        utils.append(device.util_pct if ok else None)
    return tuple(utils)


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

    def _left_behind(self, sample, running: list, ended, out: list[str]) -> None:
        """Compute processes on a GPU no live run holds, after a run that held it ended."""
        gpu = getattr(sample, "gpu", None)
        held = {index for run in running for index in run_devices(run)}
        last_on: dict[int, str] = {}
        for run in ended:  # in launch order: the last run to have held each GPU wins
            for index in run_devices(run):
                last_on[index] = run.id
        for device in (gpu.devices if gpu is not None else ()):
            pids = tuple(getattr(device, "pids", ()) or ())
            index = device.index
            if index in held or index not in last_on:
                continue
            for pid in pids:
                key = f"left:{index}:{pid}"
                self._once(key, True, f"GPU {index} still runs {_process_name(pid)} after "
                           f"{last_on[index]} ended (no live run holds this GPU)", out)

    def _once(self, key: str, active: bool, message: str, out: list[str]) -> None:
        if active and key not in self._warned:
            self._warned.add(key)
            out.append(message)
        elif not active:
            self._warned.discard(key)

    def check(self, now: float, sample, running: list, ended=()) -> list[str]:
        """New warnings for this sample; `running` are the RunStates alive now, `ended`
        those that have ended (for what they left on their GPUs). `now`: monotonic."""
        out: list[str] = []
        self._left_behind(sample, running, ended, out)
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


def _process_name(pid: int) -> str:
    """`pid N (name)` as this box sees it (NVML may give a pid of another namespace)."""
    try:
        return f"pid {pid} ({psutil.Process(pid).name()})"
    except (psutil.Error, OSError, ValueError):
        return f"pid {pid}"
