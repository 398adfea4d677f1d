"""Re-estimation after the pilot, and the projected end beside the frozen plan.

A warm-step extrapolation (median step time x steps) forgets loading, the
slow first steps, validation, checkpoints and output writing. The estimate
here decomposes what the pilot measured: start-up (launch to first record),
training time over *all* steps, validation passes, checkpoint writes and the
tail after the last record, then scales each part to the full run. The frozen
plan is never rewritten: the projection is a second calendar next to it.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

from ..campaign.calendar import build_calendar
from ..campaign.calibration import PilotMeasure, estimate_full_run, retrieval_hours  # noqa: F401
from ..campaign.plan import Plan
from .reading.feeds import recorded_sources
from .ledger.state import CampaignState, RunState


@dataclass(frozen=True)
class Estimate:
    variant: str
    seconds: float
    warm_seconds: float  # what a warm-step extrapolation would say
    measure: PilotMeasure


@dataclass(frozen=True)
class Projection:
    window_start_t: float | None
    window_end_t: float | None
    planned_end_t: float | None
    projected_end_t: float | None
    estimates: dict  # variant -> Estimate

    @property
    def slack_s(self) -> float | None:
        if self.window_end_t is None or self.projected_end_t is None:
            return None
        return self.window_end_t - self.projected_end_t


def _records(plan: Plan, run_dir: Path) -> list[dict]:
    return [r for records in recorded_sources(run_dir, plan.metrics) for r in records
            if isinstance(r.get("t"), (int, float))]


def measure_pilot(plan: Plan, run: RunState, run_dir: Path) -> PilotMeasure | None:
    records = sorted(_records(plan, run_dir), key=lambda r: r["t"])
    if not records or run.launched_t is None:
        return None
    metric = plan.campaign.metric
    first_t, last_t = records[0]["t"], records[-1]["t"]
    val_s, n_val, ckpt_s, n_ckpt, gaps = 0.0, 0, 0.0, 0, []
    prev_t = first_t
    steps = set()
    for r in records:
        gap = r["t"] - prev_t
        prev_t = r["t"]
        if r.get("event") == "checkpoint":
            n_ckpt += 1
            ckpt_s += float(r.get("block_s") or r.get("write_s") or gap)
        elif metric in r and "loss" not in r:
            n_val += 1
            val_s += gap
        elif "loss" in r:
            if isinstance(r.get("step"), (int, float)):
                steps.add(r.get("global_step", r["step"]))  # epoch-local printed steps
            gaps.append(gap)
    n_steps = len(steps) or len(gaps)
    end_t = run.ended_t if run.ended_t is not None else last_t
    later = gaps[len(gaps) // 2:] or [0.0]
    return PilotMeasure(steps=n_steps, startup_s=max(0.0, first_t - run.launched_t),
                        train_s=max(0.0, (last_t - first_t) - val_s - ckpt_s),
                        validations=n_val, validation_s=val_s, checkpoints=n_ckpt,
                        checkpoint_s=ckpt_s, tail_s=max(0.0, end_t - last_t),
                        warm_step_s=statistics.median(later))


def estimates(plan: Plan, state: CampaignState, runs_dir: Path) -> dict[str, Estimate]:
    out = {}
    for run in state.runs:
        if run.kind != "pilot" or run.state not in ("completed", "stopped"):
            continue
        variant = plan.variant(run.target)
        m = measure_pilot(plan, run, runs_dir / run.id)
        if m is None or not m.steps or not variant.steps:
            continue
        seconds, warm = estimate_full_run(m, variant.steps)
        out[variant.id] = Estimate(variant.id, seconds, warm, m)
    return out


_CACHE: dict[tuple, dict[str, Estimate]] = {}


def _cached_estimates(plan: Plan, state: CampaignState, runs_dir: Path) -> dict[str, Estimate]:
    key = (str(runs_dir), tuple(r.id for r in state.runs
                                if r.kind == "pilot" and r.ended_t is not None))
    if key not in _CACHE:
        if len(_CACHE) > 16:
            _CACHE.clear()
        _CACHE[key] = estimates(plan, state, runs_dir)
    return _CACHE[key]


def _task_id(run: RunState) -> str:
    return f"pilot:{run.target}" if run.kind == "pilot" else run.target


def project(plan: Plan, state: CampaignState, runs_dir: Path | None, now: float) -> Projection:
    """Projected end: observed intervals pinned, the rest re-estimated from now.

    Reads the pilots' metrics files (once per set of finished pilots, cached):
    call it off the UI thread.
    """
    runs_dir = runs_dir if isinstance(runs_dir, Path) else plan.state_dir / "runs"
    start = state.window_start
    planned = build_calendar(plan)
    if start is None:
        return Projection(None, None, None, None, {})
    live_plan = plan.without_variants(set(state.dropped))
    est = _cached_estimates(plan, state, runs_dir)
    durations = {vid: e.seconds / 3600 for vid, e in est.items()}
    done = {}
    wrap = state.wrapup
    if wrap is not None and wrap.started_t is not None:
        end = wrap.t if wrap.state != "started" else max(now, wrap.t)
        done["wrapup"] = ((wrap.started_t - start) / 3600, (end - start) / 3600)
    if wrap is not None and wrap.bytes:  # retrieval from the measured bundle size and link
        durations["retrieval"] = retrieval_hours(wrap.bytes, plan.campaign.link_mbps)
    for run in state.runs:
        if run.launched_t is None:
            continue
        s = (run.launched_t - start) / 3600
        if run.ended_t is not None:
            done[_task_id(run)] = (s, (run.ended_t - start) / 3600)
        else:
            expected = durations.get(run.target, 0.0) if run.kind == "run" else 0.0
            done[_task_id(run)] = (s, max((now - start) / 3600, s + expected))
    cal = build_calendar(live_plan, durations=durations, done=done,
                         earliest=(now - start) / 3600)
    return Projection(window_start_t=start, window_end_t=state.window_end,
                      planned_end_t=start + planned.end_to_end_hours * 3600,
                      projected_end_t=start + cal.end_to_end_hours * 3600, estimates=est)
