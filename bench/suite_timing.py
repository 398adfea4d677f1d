"""How long the test suite takes: the fast loop and the README's full command.

    python bench/suite_timing.py [--fast-only] [--json]

Runs `python -m pytest -q -m "not slow" -n 3` and then the README's test command
(`python -m pytest -q -n 3`) from the repository root, each in its own process
tree, and prints for each the wall time, the CPU seconds of the whole tree (user +
sys of every child, `RUSAGE_CHILDREN` around the run), the box's load average at
the start, and what pytest said at the end. The goals (issue 31): the fast loop
under 60 s and the full command under 6 min on a quiet 2-core box. The ratio column
is wall time against that goal. Not a `*_bench.py`: `python -m bench` would spend
ten minutes on it.

The children run with bytecode caching on (`PYTHONDONTWRITEBYTECODE` unset), as a
user's installed package and CI's fresh clone have it after the first import.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.figures import Figure, report  # noqa: E402

RUNS = (("fast loop (-m 'not slow' -n 3)", ["-m", "not slow", "-n", "3"], 60.0),
        ("full README command (-n 3)", ["-n", "3"], 360.0))


def timed(args: list[str]) -> tuple[float, float, str, int, list[str]]:
    """(wall s, CPU s of the process tree, pytest's last line, exit status, its FAILED and
    ERROR lines: a red run names what failed, not only how many)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True)
    wall = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = [ln for ln in done.stdout.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
    out = done.stdout.splitlines()
    failed = [ln for ln in out if ln.startswith(("FAILED ", "ERROR "))]
    failed += [ln for ln in out if ln.startswith("E ")][:12]  # why, in pytest's words
    return (wall, cpu, (lines[-1] if lines else done.stdout[-200:]).strip("= "),
            done.returncode, failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fast-only", action="store_true", help="time the fast loop only")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--quick", action="store_true", help="same as --fast-only")
    args = parser.parse_args()
    figures, status = [], 0
    for name, pytest_args, goal_s in RUNS[:1] if (args.fast_only or args.quick) else RUNS:
        load = os.getloadavg()[0]
        wall, cpu, said, code, failed = timed(pytest_args)
        status = status or code
        print(f"note: {name}: {wall:.0f} s wall, {cpu:.0f} s CPU, load {load:.1f} at the "
              f"start; pytest: {said}", file=sys.stderr)
        for line in failed:
            print(f"note: {line}", file=sys.stderr)
        figures.append(Figure(f"{name}, wall", wall, goal_s, "s", "<= 1.0x", wall <= goal_s
                              and code == 0))
        figures.append(Figure(f"{name}, CPU of the tree", cpu, None, "s", "—", code == 0))
    report(figures, args.json)
    return status


if __name__ == "__main__":
    sys.exit(main())
