"""The probes a real session samples, and which run holds which GPU."""

from __future__ import annotations

from ..engine.watching.watchdog import run_devices


def default_probes(plan):
    """NVML + host probes; they report a missing driver rather than failing."""
    from ..probes import HostProbe, NvmlProbe, Probes

    return Probes(NvmlProbe(), HostProbe({"state": plan.state_dir,
                                          "outputs": plan.outputs_dir}))


def gpu_holders(sample, running) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """Device index -> run ids: NVML's process list joined with the lanes we assigned."""
    from ..probes import runs_on_devices

    holders: dict[int, list[str]] = {}
    gpu = getattr(sample, "gpu", None)
    if gpu is not None and gpu.devices:
        pids = {r.id: r.pid for r in running if r.pid}
        holders = {k: list(v) for k, v in runs_on_devices(gpu, pids).items()}
    for run in running:  # the lanes the engine assigned (CUDA_VISIBLE_DEVICES)
        for index in run_devices(run):
            names = holders.setdefault(index, [])
            if run.id not in names:
                names.append(run.id)
    return tuple(sorted((k, tuple(v)) for k, v in holders.items()))
