"""Planning from a prior campaign: its measurements, matched to this plan's tasks.

The last bundle holds what the hand-written hours only guess: when each run
started, how long its start-up, steps, validations, checkpoint writes and
output tail took, and how big the bundle was. The bundle layer reads and
verifies the bundle and hands planning one small record, a `Prior` (its
runs as `PriorRun`s with their `PilotMeasure`); everything after that is
planning and lives here: `calibrate` turns a `Prior` into the duration each
task of a new plan would take, matched by variant id, or by command and params
when the ids changed; `plan_from_prior` gives the plan that carries it; and
`recorded_plan` gives a started campaign its frozen plan's calibration again
without reading any bundle (the prior may be gone). So loading a plan never
climbs into `tui.bundle` (tests/test_plan_layers.py checks it).
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from .calendar import pilot_hours
from .calibration import (Calibration, PilotMeasure, TaskCalibration, apply_calibration,
                          estimate_full_run, retrieval_hours, with_calibration_table)
from .plan import Plan, Variant
from .validate import PlanError

FROZEN = ".itera/plan.toml"  # the frozen plan, as a person finds it beside campaign.toml

@dataclass(frozen=True)
class PriorRun:
    """One run of the prior campaign as planning needs it: what it ran, how it ended,
    how long it took (launch to exit, from the ledger) and what it measured."""
    id: str
    target: str
    kind: str  # step | pilot | run | post
    state: str
    argv: tuple[str, ...]
    params_json: str  # params as canonical JSON, to compare with a new variant's
    seconds: float | None  # launch to exit, from the ledger
    measure: PilotMeasure | None  # start-up, steps, validation, checkpoints, tail


@dataclass(frozen=True)
class Prior:
    """A verified bundle of the same corpus, as measurements (`tui.bundle.prior` reads it)."""
    path: Path
    campaign: str
    manifest_sha256: str
    corpus_sha256: str | None
    bytes: int
    runs: tuple[PriorRun, ...]


def params_json(params: dict) -> str:
    """Params as canonical JSON: how a prior run's params are compared with a variant's."""
    return json.dumps(params, sort_keys=True, default=str)


def _matched(prior: Prior, target: str, argv: tuple[str, ...], params: dict,
             kinds: tuple[str, ...]) -> tuple[list[PriorRun], str]:
    """The prior's runs of the same variant or step: by id, else by command (+ params)."""
    same_id = [r for r in prior.runs if r.target == target and r.kind in kinds]
    if same_id:
        return same_id, "id"
    wanted = params_json(params)
    by_config = [r for r in prior.runs if r.kind in kinds and r.argv == tuple(argv)
                 and r.params_json == wanted]
    if not by_config:
        return [], ""
    return by_config, "command+params" if params else "command"


def _best(runs: list[PriorRun], kind: str) -> PriorRun | None:
    """The last completed run of a kind with measured steps (else the last stopped one)."""
    usable = [r for r in runs if r.kind == kind and r.measure is not None and r.measure.steps]
    done = [r for r in usable if r.state == "completed"]
    return (done or usable or [None])[-1]


def _figures(m: PilotMeasure) -> tuple[tuple[str, float], ...]:
    out = [("startup_s", m.startup_s), ("step_s", m.step_s), ("tail_s", m.tail_s),
           ("steps", float(m.steps))]
    if m.validations:
        out.append(("validation_s", m.validation_s / m.validations))
    if m.checkpoints:
        out.append(("checkpoint_s", m.checkpoint_s / m.checkpoints))
    return tuple(sorted(out))


def _variant_tasks(plan: Plan, prior: Prior, v: Variant) -> list[TaskCalibration]:
    runs, how = _matched(prior, v.id, v.command, v.params_dict, ("pilot", "run"))
    note = ""
    if how == "id" and runs and not any(r.argv == tuple(v.command) for r in runs):
        note = "same id, another command than the prior's"
    full, pilot = _best(runs, "run"), _best(runs, "pilot")
    out = []
    if plan.pilot is not None and plan.pilot.hours is None and plan.pilot.steps:
        steps = min(plan.pilot.steps, v.steps or plan.pilot.steps)
        source = pilot or full
        out.append(_task(f"pilot:{v.id}", "pilot", pilot_hours(plan, v), source, steps, how,
                         note))
    steps = v.steps or (full.measure.steps if full is not None and full.state == "completed"
                        else None)
    source = full or pilot
    if steps is None and source is not None:
        out.append(TaskCalibration(v.id, "run", v.hours, None, how, source.id,
                                   note="give the variant's steps to scale its pilot"))
    else:
        out.append(_task(v.id, "run", v.hours, source, steps, how, note))
    return out


def _task(task: str, kind: str, hand: float, source: PriorRun | None, steps: int | None,
          how: str, note: str) -> TaskCalibration:
    if source is None or steps is None:
        return TaskCalibration(task, kind, hand, None, note=note or "nothing measured matches")
    seconds, _ = estimate_full_run(source.measure, steps)
    return TaskCalibration(task, kind, hand, seconds / 3600, how, source.id,
                           _figures(source.measure), note)


def _step_task(prior: Prior, step) -> TaskCalibration:
    runs, how = _matched(prior, step.id, step.command, {}, ("step", "post"))
    timed = [r for r in runs if r.seconds is not None and r.state == "completed"]
    if not timed:
        return TaskCalibration(step.id, "step", step.hours, None,
                               note="nothing measured matches")
    last = timed[-1]
    return TaskCalibration(step.id, "step", step.hours, last.seconds / 3600, how, last.id)


def calibrate(plan: Plan, prior: Prior, used: str = "hand-written") -> Calibration:
    """Per task of `plan`: the hand-written duration and the one the prior predicts."""
    tasks = [t for v in plan.variants for t in _variant_tasks(plan, prior, v)]
    tasks += [_step_task(prior, s) for s in plan.steps if s.who == "machine" and s.command]
    link = plan.campaign.link_mbps
    tasks.append(TaskCalibration("retrieval", "retrieval", plan.campaign.retrieval_hours,
                                 retrieval_hours(prior.bytes, link), "bundle size",
                                 f"{prior.bytes} bytes at {link:g} Mb/s"))
    return Calibration(os.path.relpath(prior.path, plan.root), prior.campaign,
                       prior.manifest_sha256, prior.corpus_sha256, used, tuple(tasks))


def plan_from_prior(plan: Plan, prior: Prior, calibrated: bool | None = None) -> Plan:
    """`plan` carrying the calibration `prior` predicts; with `calibrated` (default:
    `[campaign] calibrated`) its calendar uses the calibrated durations. Its `raw` holds
    the `[calibration]` table, so a plan frozen from it records which durations were used."""
    use = plan.campaign.calibrated if calibrated is None else calibrated
    cal = calibrate(plan, prior, "calibrated" if use else "hand-written")
    return apply_calibration(replace(plan, raw=with_calibration_table(plan.raw, cal)), cal)


def recorded_plan(plan: Plan) -> Plan:
    """A started campaign's plan with the calibration its frozen plan recorded (the
    prior is not read again, it may be gone); `plan` unchanged when none was recorded.
    A recorded calibration that cannot be read is a `PlanError` naming the file: the
    campaign was planned with it, and the hand-written hours would silently differ."""
    from .loading.load import plan_from_dict  # load imports calibration, which this module uses

    frozen = plan.state_dir / "plan.toml"
    try:
        text = frozen.read_bytes()
    except FileNotFoundError:
        return plan  # not started: nothing was recorded
    except OSError as exc:
        raise PlanError([f"{FROZEN}: unreadable ({exc.strerror or exc})"]) from None
    if b"[calibration]" not in text:
        return plan  # planned by hand: nothing to restore
    try:
        recorded = plan_from_dict(tomllib.loads(text.decode()), plan.path,
                                  check_files=False).calibration
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PlanError([f"{FROZEN}: its [calibration] cannot be read ({exc}); the "
                         "campaign was planned with it, so it is not replaced by the "
                         "hand-written hours"]) from None
    except PlanError as exc:
        raise PlanError([f"{FROZEN}: {problem}" for problem in exc.problems]) from None
    if recorded is None:
        return plan
    return apply_calibration(replace(plan, raw=with_calibration_table(plan.raw, recorded)),
                             recorded)
