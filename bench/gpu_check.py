"""Check the NVML probe against a real GPU under load (run on a GPU machine).

The unit tests use a stand-in NVML; this script is the one place that checks
the real thing: it starts a small CUDA matmul loop with torch in a separate
process (as a training run would be), samples ``NvmlProbe`` every 0.5 s while
it runs, and prints each sample (util, memory, temperature, power, pids, and
whether the job's pid was seen), the run-to-GPU mapping and the probe timing.
Without a GPU it says so and exits 0; a CUDA job that fails exits 1.

    python bench/gpu_check.py [--seconds 10]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tui.probes import NvmlProbe, runs_on_devices  # noqa: E402

JOB = """
import sys, time, torch
if not torch.cuda.is_available():
    print("torch sees no CUDA device (torch %s)" % torch.__version__, file=sys.stderr)
    sys.exit(3)
x = torch.randn(4096, 4096, device="cuda")
torch.cuda.synchronize()
print("ready", torch.cuda.get_device_name(0), flush=True)
end = time.time() + float(sys.argv[1])
while time.time() < end:
    for _ in range(20):
        y = x @ x
    torch.cuda.synchronize()
print("done", float(y[0, 0]), flush=True)
"""

GIB = 2**30


def fmt(value, unit: str = "", scale: float = 1.0, digits: int = 0) -> str:
    return "N/A" if value is None else f"{value / scale:.{digits}f}{unit}"


def describe(device, job_pid: int) -> str:
    return (f"gpu{device.index} {device.state} util {fmt(device.util_pct, '%')} "
            f"mem {fmt(device.mem_used_bytes, '', GIB, 1)}/{fmt(device.mem_total_bytes, ' GiB', GIB, 1)} "
            f"temp {fmt(device.temp_c, ' C')} power {fmt(device.power_w, ' W', 1, 1)} "
            f"pids {list(device.pids)} job seen: {job_pid in device.pids}"
            + (f" problem: {device.problem}" if device.problem else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    seconds = parser.parse_args().seconds

    probe = NvmlProbe()
    first = probe.sample()
    if first.driver != "ok" or not first.devices:
        print(f"NO GPU: {first.driver}: {first.message or 'no device'} - nothing to check.")
        return 0
    print(f"NVML ok: {len(first.devices)} GPU(s)")
    for device in first.devices:
        print(f"  gpu{device.index}: {device.name} {device.uuid}")

    job = subprocess.Popen([sys.executable, "-c", JOB, str(seconds)],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready = job.stdout.readline().strip()  # blocks until CUDA is up (or the job died)
    if not ready.startswith("ready"):
        job.wait(timeout=30)
        print(f"CUDA JOB FAILED (exit {job.returncode}): {job.stderr.read()[-2000:]}")
        return 1
    print(f"job pid {job.pid}: {ready}\n")

    timings, seen, samples, last = [], 0, 0, first
    start = time.time()
    while job.poll() is None and time.time() - start < seconds + 30:
        t0 = time.perf_counter()
        snap = probe.sample()
        timings.append(time.perf_counter() - t0)
        samples += 1
        seen += any(job.pid in d.pids for d in snap.devices)
        owners = runs_on_devices(snap, {"job": job.pid})
        print(f"+{snap.t - start:5.1f}s driver {snap.driver} runs {owners}")
        for device in snap.devices:
            print("   ", describe(device, job.pid))
        last = snap
        time.sleep(0.5)
    out, err = job.communicate(timeout=30)
    probe.close()

    print("\nlast sample as a JSON line:\n" + json.dumps(last.to_dict()))
    timings.sort()
    print(f"\nprobe.sample(): median {statistics.median(timings) * 1e3:.3f} ms, "
          f"worst {timings[-1] * 1e3:.3f} ms over {len(timings)} samples "
          f"({statistics.median(timings) / 10:.4%} of the 10 s interval)")
    print(f"job pid seen by NVML in {seen}/{samples} samples"
          + ("" if seen else " (a container's pid namespace can hide it)"))
    print(f"job exit {job.returncode}: {(out.strip().splitlines() or [''])[-1]}")
    if job.returncode != 0:
        print(err[-2000:])
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
