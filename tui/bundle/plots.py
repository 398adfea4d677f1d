"""The bundle's figures: the series chosen here, drawn by matplotlib in a fresh process.

The core never imports matplotlib (nor does the control room): this module
reads the run records through the engine's own feeds (what the stop rules
saw), decides what a figure shows (which runs, the log scale, the y range,
what is clipped) and writes that as a small JSON spec; `python -m
tui.plotting.draw` draws it and says what it drew. A run that diverged (a
non-finite value, or one over CLIP_FACTOR x the median of the other runs) is
clipped and marked at the top of the axes: it never sets the y range, so the
real curves stay readable (the rule: `tui.campaign.divergence`, shared with the room's
live chart). The loss figure is what a researcher keeps: each run's train
loss smoothed (TensorBoard's debiased EMA, `ema`) over the faint raw curve,
its validation loss beside it where the run logs one, pilots and full runs
in panels of their own. The quality figure carries the control's final value
and the bar (control +/- min_gain, the threshold when one is set).
figures.json carries every series (raw, smoothed, clipped stretches) so any
tool can redraw them. matplotlib is a dependency of the package; a drawing
that fails anyway is a `Drawing.problem` for the report and the ending,
never a failed bundle.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from ..campaign.plan import Plan
from ..engine.reading.feeds import recorded_sources
from ..engine.ledger.state import RunState
from ..campaign.divergence import CLIP_FACTOR, clip_diverged  # noqa: F401 (CLIP_FACTOR: its home)
from ..engine.checkpoints.verifier_process import NEUTRAL_CWD, isolated_command, isolated_env

PLOTTED_KINDS = ("pilot", "run")  # setup/check steps have no curve worth a legend entry
FIGURES = ("loss_curves", "quality")
MAX_POINTS = 2000
DRAW_TIMEOUT_S = 180.0
DRAWER = "tui.plotting.draw"
ENDED_BY_THE_TOOL = ("pilot", "pilot_bound", "wrapup")


VALIDATION_NAMES = ("val_loss", "eval_loss", "validation_loss")  # the first one a run logs
EMA_MIN, EMA_MAX = 0.6, 0.95  # TensorBoard's default weight, and its most for long curves


@dataclass(frozen=True)
class Series:
    run_id: str
    label: str  # `variant·pilot`, `variant·run` (`#2` from the second attempt)
    variant: str
    kind: str  # pilot | run
    points: tuple[tuple[float, float | None], ...]  # None where clipped: the line breaks
    clipped: tuple[tuple[float, str], ...]  # (step, value as text): start of each clipped stretch
    role: str = "train"  # train | validation (the loss figure draws both where logged)
    smoothed: tuple[tuple[float, float | None], ...] = ()  # EMA of `points` (train loss only)
    source: str = ""  # the metric's name in the run's records (loss, val_loss, ...)
    ema_weight: float | None = None  # the weight `smoothed` was made with (per curve length)


@dataclass(frozen=True)
class RefLine:
    y: float
    label: str
    role: str  # control | bar | threshold


@dataclass(frozen=True)
class Panel:
    name: str  # file stem: loss_curves | quality
    title: str
    ylabel: str
    log: bool
    ylim: tuple[float, float] | None  # chosen here from the kept points; None: nothing to draw
    series: tuple[Series, ...]
    lines: tuple[RefLine, ...] = ()
    note: str = ""  # under the title: what was clipped, what is missing
    smoothing: str | None = None  # "ema" when train curves carry a `smoothed` series


@dataclass(frozen=True)
class Drawing:
    """What the drawing process made: files in `out_dir` (names), what it drew, or why not."""

    files: tuple[str, ...]
    drawn: dict  # figures.json: per figure its legend labels, y limits and scale
    problem: str | None = None

    @property
    def summary(self) -> str:
        """The wrap-up's progress line: what was drawn, or why nothing was."""
        if self.files and not self.problem:
            drawn = ", ".join(f for f in self.files if f.endswith(".png"))
            return f"figures: {drawn} (drawn by matplotlib in a fresh process)"
        return f"no figures: {self.problem or 'nothing was drawn'}"


def run_label(run: RunState) -> str:
    label = f"{run.target}·{run.kind}"
    return label + (f" #{run.attempt}" if (run.attempt or 1) > 1 else "")


def _number(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


def read_series(plan: Plan, run_dir: Path, name: str) -> list[tuple[float, float]]:
    """(global step, value) of `name`, non-finite values kept, from the first source with it."""
    for records in recorded_sources(run_dir, plan.metrics, frozenset({name})):
        points, first_bad = [], []
        for r in records:
            step = _number(r.get("global_step", r.get("step")))
            value = _number(r.get(name))
            if step is not None and value is not None and "event" not in r:
                points.append((step, value))
                if not first_bad and not math.isfinite(value):
                    first_bad.append((step, value))
                if len(points) >= 8 * MAX_POINTS:  # a flood: thinned as it comes (bounded)
                    points = points[::2] + ([points[-1]] if len(points) % 2 == 0 else [])
        if points:
            return _thin(points, first_bad)
    return []


def _thin(points, first_bad=()):
    if len(points) <= MAX_POINTS:
        return points
    stride = math.ceil(len(points) / MAX_POINTS)
    kept = points[::stride]
    bad = list(first_bad) or [p for p in points if not math.isfinite(p[1])][:1]  # a divergence
    return sorted(set(kept + bad + [points[-1]]))  # is never thinned out


def _clip(raw: dict[str, list[tuple[float, float]]]):
    """Per run: points with clipped values as None, the clipped stretches' starts."""
    return {rid: (c.points, c.starts) for rid, c in clip_diverged(raw).items()}


def ema_weight(n_points: int) -> float:
    """More smoothing for longer curves (each curve its own: a 40-step pilot is not
    smoothed like a 600-step run): about the last 10 points weigh in, within EMA_MIN
    and EMA_MAX."""
    if n_points <= 1:
        return EMA_MIN
    return round(min(EMA_MAX, max(EMA_MIN, 1 - 10 / n_points)), 3)


def ema(points, weight: float) -> tuple[tuple[float, float | None], ...]:
    """TensorBoard's smoothing: an exponential moving average, debiased at the start, over
    the kept values; None stays None (a clipped stretch), and the average restarts after."""
    out, last, n = [], 0.0, 0
    for step, v in points:
        if v is None:
            out.append((step, None))
            last, n = 0.0, 0
            continue
        last = last * weight + (1 - weight) * v
        n += 1
        out.append((step, last / (1 - weight ** n)))
    return tuple(out)


def _limits(values: list[float], log: bool) -> tuple[float, float] | None:
    if not values:
        return None
    lo, hi = min(values), max(values)
    if log:
        a, b = math.log10(lo), math.log10(hi)
        pad = max(0.05 * (b - a), 0.05)
        return 10 ** (a - pad), 10 ** (b + pad)
    pad = 0.05 * (hi - lo) or max(abs(hi) * 0.05, 0.05)
    return lo - pad, hi + pad


def panel(name: str, title: str, ylabel: str, runs: list[RunState],
          raw: dict[str, list[tuple[float, float]]], lines: tuple[RefLine, ...] = (),
          force_log: bool = False, validation: dict | None = None,
          smooth: bool = False, source: str = "") -> Panel:
    """`raw`: run -> (step, value) of the figure's metric; `validation`: run -> (name,
    points) of a validation loss, drawn beside it; `smooth`: an EMA over each train curve."""
    validation = validation or {}
    every = {(rid, "train"): pts for rid, pts in raw.items()}
    every |= {(rid, "validation"): pts for rid, (_, pts) in validation.items()}
    clipped = clip_diverged(every)
    kept = [v for c in clipped.values() for _, v in c.points if v is not None]
    refs = [line.y for line in lines]
    positive = bool(kept) and min(kept + refs) > 0
    log = positive and (force_log or max(kept) / min(kept) >= 100)
    series = []
    for r in runs:
        if r.id in raw:
            c = clipped[r.id, "train"]
            weight = ema_weight(len(c.points)) if smooth else None
            series.append(Series(r.id, run_label(r), r.target, r.kind, c.points, c.starts,
                                 "train", ema(c.points, weight) if smooth else (), source,
                                 weight))
        if r.id in validation:
            c = clipped[r.id, "validation"]
            series.append(Series(r.id, f"{run_label(r)} validation", r.target, r.kind,
                                 c.points, c.starts, "validation", (), validation[r.id][0]))
    notes = [f"{s.label} clipped from step {s.clipped[0][0]:g} ({s.clipped[0][1]})"
             for s in series if s.clipped]
    silent = [run_label(r) for r in runs if r.id not in raw]
    if silent:
        notes.append(f"no {ylabel} recorded: {', '.join(silent)}")
    ylim = _limits(kept + refs, log) if kept else None
    return Panel(name, title + (" (log scale)" if log else ""), ylabel, log, ylim,
                 tuple(series), lines, "; ".join(notes), "ema" if smooth else None)


def _control_final(plan: Plan, runs: list[RunState], values: dict, control_value):
    if control_value is not None:
        return control_value
    for run in reversed(runs):
        if run.target == plan.campaign.control and run.kind == "run" and run.id in values:
            finite = [v for _, v in values[run.id] if math.isfinite(v)]
            if finite:
                return finite[-1]
    return None


def build_spec(plan: Plan, runs: list[RunState], runs_dir: Path,
               control_value: float | None = None) -> tuple[Panel, ...]:
    """The two figures of a bundle. `control_value`: the conclusion's control figure (the
    final value shown everywhere else); read from the control's full run when None."""
    c = plan.campaign
    shown = [r for r in runs if r.kind in PLOTTED_KINDS and r.launched_t is not None]
    losses = {r.id: pts for r in shown if (pts := read_series(plan, runs_dir / r.id, "loss"))}
    validation = {}
    for r in shown:
        for name in VALIDATION_NAMES:
            if pts := read_series(plan, runs_dir / r.id, name):
                validation[r.id] = (name, pts)
                break
    metric = {r.id: pts for r in shown if (pts := read_series(plan, runs_dir / r.id, c.metric))}
    control = _control_final(plan, shown, metric, control_value)
    lines: list[RefLine] = []
    if control is not None:
        sign = 1 if c.direction == "max" else -1
        who = "control" if c.control == "control" else f"control ({c.control})"
        lines.append(RefLine(control, f"{who} final {c.metric}: {control:.4g}", "control"))
        bar = control + sign * c.min_gain
        lines.append(RefLine(bar, f"the bar (gain >= {c.min_gain:g}): {bar:.4g}", "bar"))
    if c.threshold is not None:
        lines.append(RefLine(c.threshold, f"threshold {c.threshold:g}", "threshold"))
    return (panel("loss_curves", f"{c.name}: loss per run", "loss", shown, losses,
                  force_log=True, validation=validation, smooth=True, source="loss"),
            panel("quality", f"{c.name}: {c.metric} per run ({c.direction}imise)", c.metric,
                  shown, metric, tuple(lines), source=c.metric))


def spec_json(panels: tuple[Panel, ...]) -> str:
    return json.dumps({"format": "itera-figures/1", "panels": [asdict(p) for p in panels]},
                      indent=1, allow_nan=False)


def draw(panels: tuple[Panel, ...], out_dir: Path, *, python: str = sys.executable,
         env: dict | None = None, timeout: float = DRAW_TIMEOUT_S) -> Drawing:
    """Draw in a fresh, isolated `python -P -m tui.plotting.draw` (in `/`, a minimal
    environment: nothing planted where it was started is imported); the files land
    in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="itera-figures-") as tmp:
        spec = Path(tmp) / "spec.json"
        spec.write_text(spec_json(panels))
        try:
            done = subprocess.run(isolated_command(DRAWER, str(spec), str(out_dir.resolve()),
                                                   python=python),
                                  env=isolated_env(env), cwd=NEUTRAL_CWD,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return Drawing((), {}, f"the drawing process took over {timeout:.0f} s")
        except OSError as error:
            return Drawing((), {}, f"the drawing process did not start: {error.strerror}")
    try:
        drawn = json.loads((out_dir / "figures.json").read_text())
    except (OSError, ValueError):
        drawn = {}
    if done.returncode != 0 or not isinstance(drawn, dict):
        tail = (done.stderr.strip().splitlines() or ["no message"])[-1]
        return Drawing((), {}, tail if done.returncode == 3 else
                       f"the drawing process failed (exit {done.returncode}): {tail[:300]}")
    files = tuple(f"{name}.{ext}" for name in FIGURES for ext in ("png", "svg")
                  if (out_dir / f"{name}.{ext}").is_file())
    return Drawing(files + ("figures.json",), drawn)


def stage_figures(plan: Plan, state, runs_dir: Path, conclusion, stager,
                  drawer=draw) -> Drawing:
    """Draw a campaign's figures outside the bundle, then stage what was drawn (kind
    `figure`, each file hashed into the manifest like any other). `drawer`: `draw`, or
    the wrap-up's helpers port."""
    panels = build_spec(plan, list(state.runs), runs_dir, conclusion.control_value)
    with tempfile.TemporaryDirectory(prefix="itera-figures-") as tmp:
        drawing = drawer(panels, Path(tmp))
        for name in drawing.files:
            stager.copy(Path(tmp) / name, name, "figure")
    return drawing
