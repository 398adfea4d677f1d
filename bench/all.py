"""Every bench in one go, one table: `python -m bench` (or `python bench/all.py`).

Finds every `bench/*_bench.py`, runs each in its own fresh process (one after
the other, so they do not slow each other down) with `--json --quick` (a bench
whose source never mentions `--quick` runs at its defaults), and
prints one table of all their figures: value, the baseline measured beside
it, the ratio, the goal and ok/SHORT. A bench that fails, hangs or prints no
figures gets an ERROR row with its reason: nothing is hidden. Lines a bench
writes to stderr starting with "note:" (size, load average, conditions) are
printed under the table.

    python -m bench [--full] [--only NAME ...] [--timeout S] [--json] [--verbose]

--full runs each bench at its full size (minutes each) instead of --quick.
Exit status 0 when every figure is ok, 1 otherwise.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
sys.path.insert(0, str(ROOT))

from bench.figures import Figure  # noqa: E402

FIGURE_FIELDS = tuple(f.name for f in dataclasses.fields(Figure))


@dataclass(frozen=True)
class BenchResult:
    name: str  # "checkpoint" for bench/checkpoint_bench.py
    figures: tuple[Figure, ...]
    error: str | None  # why it produced no (or not all) figures
    notes: tuple[str, ...]
    wall_s: float


def discover(only: list[str] | None = None, directory: Path = BENCH_DIR) -> list[Path]:
    scripts = sorted(directory.glob("*_bench.py"))
    if only:
        scripts = [s for s in scripts if any(o in s.stem for o in only)]
    return scripts


def parse_figures(stdout: str) -> tuple[Figure, ...] | None:
    """The figures of the last stdout line that is a JSON list of figures, or None."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            items = json.loads(line)
        except ValueError:
            continue
        if isinstance(items, list) and all(isinstance(i, dict) and set(FIGURE_FIELDS) <= set(i)
                                           for i in items):
            return tuple(Figure(**{k: i[k] for k in FIGURE_FIELDS}) for i in items)
    return None


def run_bench(script: Path, *, quick: bool, timeout: float) -> BenchResult:
    name = script.stem.removesuffix("_bench")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    quick = quick and "--quick" in script.read_text(errors="replace")  # one without it: its defaults
    cmd = [sys.executable, str(script), "--json"] + (["--quick"] if quick else [])
    start = time.monotonic()
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        stderr = expired.stderr.decode(errors="replace") if isinstance(expired.stderr, bytes) \
            else (expired.stderr or "")
        return BenchResult(name, (), f"timed out after {timeout:g} s", _notes(stderr),
                           time.monotonic() - start)
    except OSError as error:
        return BenchResult(name, (), f"cannot start: {error}", (), time.monotonic() - start)
    wall = time.monotonic() - start
    figures = parse_figures(done.stdout)
    error = None
    if figures is None or done.returncode != 0:
        tail = [line for line in done.stderr.strip().splitlines() if line.strip()]
        reason = tail[-1].strip() if tail else "no output on stderr"
        error = (f"exit {done.returncode}: {reason}" if done.returncode != 0
                 else f"printed no JSON figures ({reason})")
    return BenchResult(name, figures or (), error, _notes(done.stderr), wall)


def _notes(stderr: str) -> tuple[str, ...]:
    return tuple(line.strip()[len("note:"):].strip() for line in stderr.splitlines()
                 if line.strip().startswith("note:"))


def _cell(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g}"


def _ratio(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x:.2f}x" if abs(x) >= 0.1 else f"{x:.2g}x"


def table(results: list[BenchResult]) -> list[str]:
    head = f"{'bench':<11} {'figure':<44} {'value':>17} {'baseline':>10} {'ratio':>7} {'goal':>13}  ok"
    lines = [head, "-" * len(head)]
    for r in results:
        for f in r.figures:
            lines.append(f"{r.name:<11} {f.name[:44]:<44} {_cell(f.value):>10} {f.unit:<6} "
                         f"{_cell(f.baseline):>10} {_ratio(f.ratio):>7} {f.goal:>13}  "
                         f"{'ok' if f.ok else 'SHORT'}")
        if r.error:
            lines.append(f"{r.name:<11} ERROR: {r.error}"[:len(head) + 60])
    return lines


def summary(results: list[BenchResult]) -> str:
    figures = [f for r in results for f in r.figures]
    short = sum(not f.ok for f in figures)
    failed = [r.name for r in results if r.error]
    wall = sum(r.wall_s for r in results)
    return (f"{len(figures)} figures from {len(results)} benches in {wall:.0f} s: "
            f"{len(figures) - short} ok, {short} short"
            + (f"; failed: {', '.join(failed)}" if failed else ""))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="full-size benches instead of --quick")
    parser.add_argument("--only", nargs="+", metavar="NAME", help="only benches whose name contains NAME")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per bench (600)")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    parser.add_argument("--verbose", action="store_true", help="say each bench as it starts")
    args = parser.parse_args(argv)
    scripts = discover(args.only)
    if not scripts:
        print(f"no bench matches {args.only}", file=sys.stderr)
        return 2
    load_before = os.getloadavg()[0]
    results = []
    for script in scripts:
        if args.verbose or not args.json:
            print(f"running {script.name}…", file=sys.stderr, flush=True)
        results.append(run_bench(script, quick=not args.full, timeout=args.timeout))
    load_after = os.getloadavg()[0]
    if args.json:
        print(json.dumps({"benches": [{"name": r.name, "error": r.error, "notes": list(r.notes),
                                       "wall_s": round(r.wall_s, 1),
                                       "figures": [dataclasses.asdict(f) | {"ratio": f.ratio}
                                                   for f in r.figures]} for r in results],
                          "load_average": [load_before, load_after], "quick": not args.full}))
    else:
        print("\n".join(table(results)))
        print(summary(results) + f"; {'quick' if not args.full else 'full'} sizes; load average "
              f"{load_before:.1f} -> {load_after:.1f} on {os.cpu_count()} CPUs")
        for r in results:
            for note in r.notes:
                print(f"  {r.name}: {note}")
    ok = all(not r.error for r in results) and all(f.ok for r in results for f in r.figures)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
