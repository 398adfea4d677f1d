"""One shape for every bench figure, so `python -m bench` can print one table.

Each bench script builds `Figure`s (a measured value, the baseline measured
side by side in the same run, and the goal as a bound on their ratio) and
calls `report(figures, as_json)`: a readable table by default, one JSON list
with `--json`, which is what `bench/__main__.py` collects.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

# the control room's share of one core while it follows live runs (nvitop's level):
# the app bench's goal for the whole room, and the remote bench's for following two boxes
ROOM_CPU_GOAL_PCT = 3.0


@dataclass(frozen=True)
class Figure:
    name: str  # what was measured, e.g. "verify demo bundle, wall"
    value: float
    baseline: float | None  # the side-by-side baseline, same unit; None for absolute goals
    unit: str  # "s", "rec/s", "% core", "MB", ...
    goal: str  # e.g. "<= 1.5x" or ">= 0.5x" (ratio) or "< 3 % core" (absolute)
    ok: bool

    @property
    def ratio(self) -> float | None:
        if self.baseline in (None, 0):
            return None
        return self.value / self.baseline


def ratio_ok(value: float, baseline: float, goal: str) -> bool:
    """Check a ratio goal written as '<= 1.5x' / '>= 0.5x'."""
    op, bound = goal.split()
    bound = float(bound.rstrip("x"))
    ratio = value / baseline if baseline else float("inf")
    return ratio <= bound if op in ("<=", "<") else ratio >= bound


def ratio_figure(name: str, value: float, baseline: float, unit: str, goal: str) -> Figure:
    return Figure(name, value, baseline, unit, goal, ratio_ok(value, baseline, goal))


def report(figures: list[Figure], as_json: bool = False) -> None:
    if as_json:
        print(json.dumps([asdict(f) | {"ratio": f.ratio} for f in figures]))
        return
    for line in table(figures):
        print(line)


def table(figures: list[Figure]) -> list[str]:
    head = f"{'figure':<44} {'value':>12} {'baseline':>12} {'ratio':>7} {'goal':>14}  ok"
    lines = [head, "-" * len(head)]
    for f in figures:
        base = "—" if f.baseline is None else f"{f.baseline:.4g}"
        ratio = "—" if f.ratio is None else f"{f.ratio:.2f}x"
        lines.append(f"{f.name:<44} {f.value:>10.4g} {f.unit:<1} {base:>12} {ratio:>7} "
                     f"{f.goal:>14}  {'ok' if f.ok else 'SHORT'}")
    return lines
