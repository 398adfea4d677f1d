"""How much one probe sample costs, against the 10 s engine sampling interval.

The engine writes one GPU + host record every 10 s for days and the control
room samples about once a second, so one sample must stay well under 1% of
the interval. Prints median / p95 / worst wall time and CPU time over N
samples, for the real NVML probe (or says it is unavailable), the host probe,
and the probe's own logic over a 4-GPU stand-in NVML.

    python bench/probe_bench.py [--samples 200] [--quick] [--json]

--quick: 50 samples. --json: the figures as one JSON list (each median
against the 10 s interval, goal <= 0.01x).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.figures import ratio_figure  # noqa: E402
from bench.figures import report as report_figures  # noqa: E402
from tui.probes import HostProbe, NvmlProbe, Probes  # noqa: E402

INTERVAL_S = 10.0


def measure(fn, samples: int) -> tuple[list[float], list[float]]:
    fn()  # warm up: lazy import, nvmlInit, handles
    walls, cpus = [], []
    for _ in range(samples):
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    return walls, cpus


FIGURES = []  # one per report() line: median sample wall time against the interval


def report(label: str, walls: list[float], cpus: list[float]) -> None:
    FIGURES.append(ratio_figure((label if label.startswith("probe") else f"probe {label}")[:44], statistics.median(walls), INTERVAL_S, "s", "<= 0.01x"))
    walls = sorted(walls)
    median, worst = statistics.median(walls), walls[-1]
    p95 = walls[int(0.95 * (len(walls) - 1))]
    print(f"{label:<38} median {median * 1e3:8.3f} ms   p95 {p95 * 1e3:8.3f} ms   "
          f"worst {worst * 1e3:8.3f} ms   cpu/sample {statistics.mean(cpus) * 1e3:7.3f} ms")
    print(f"{'':<38} = {median / INTERVAL_S:.4%} (median), {worst / INTERVAL_S:.4%} (worst) "
          f"of the {INTERVAL_S:g} s interval; {median:.4%} of a 1 s UI tick")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=None, help="samples per probe (200)")
    parser.add_argument("--quick", action="store_true", help="50 samples")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    n = args.samples or (50 if args.quick else 200)
    out = sys.stdout
    if args.json:  # the readable lines go to stderr, the figures alone to stdout
        sys.stdout = sys.stderr
    print(f"probe cost over {n} samples (Python {sys.version.split()[0]})\n")

    nvml = NvmlProbe()
    first = nvml.sample()
    with tempfile.TemporaryDirectory() as tmp:
        host = HostProbe({"state": tmp, "outputs": Path(tmp) / "out", "home": Path.home()})
        if first.driver == "ok":
            print(f"NVML: {len(first.devices)} GPU(s): "
                  + ", ".join(d.name or "?" for d in first.devices))
            report("full sample (NVML + host)", *measure(Probes(nvml, host).sample, n))
            report("NVML only", *measure(nvml.sample, n))
        else:
            print(f"NVML: unavailable ({first.driver}: {first.message});"
                  " the GPU part was not measured on this machine")
            report("full sample (NVML 'missing' + host)", *measure(Probes(nvml, host).sample, n))
        report("host only (3 disk paths)", *measure(host.sample, n))

    from fake_pynvml import FakeGpu, FakeNvml
    fake = NvmlProbe(FakeNvml([FakeGpu(compute_pids=[1, 2]) for _ in range(4)]))
    report("probe logic, 4-GPU stand-in NVML", *measure(fake.sample, n))
    nvml.close()
    print("\ngoal: a full sample under 1% of the 10 s interval")
    print(f"note: NVML {first.driver}; {n} samples per probe")
    sys.stdout = out
    report_figures(FIGURES, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
