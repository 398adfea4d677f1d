"""An earlier campaign's bundle as evidence for the next plan (`check --prior`).

The last bundle holds what the hand-written hours only guess: when each run
started, how long its start-up, steps, validations, checkpoint writes and
output tail took, and how big the bundle was. `read_prior` reads that
(the manifest, the frozen plan and ledger copies, each run's metrics files)
and `calibrate` turns it into the duration each task of a new plan would
take, matched by variant id, or by command and params when the ids changed.

Evidence must be trustworthy and about the same data: a bundle that is not
verified (its report says so, or its files no longer match its manifest) or
that was measured on another corpus is refused with the reason (`PlanError`,
exit status 2).

It lives in `tui/bundle` because it reads the bundle's format and reuses the
engine's pilot decomposition (`tui.engine.estimate.measure_pilot` and
`estimate_full_run`), which `tui/campaign`, the lowest layer, may not import;
the campaign layer only receives the resulting `Calibration`.
"""

from __future__ import annotations

import json
import os
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path

from ..campaign.calendar import pilot_hours
from ..campaign.calibration import (Calibration, TaskCalibration, apply_calibration,
                                    corpus_sha256, with_calibration_table)
from ..campaign.files import sha256_file
from ..campaign.load import plan_from_dict
from ..campaign.plan import Plan, Variant
from ..campaign.validate import PlanError
from ..engine.estimate import PilotMeasure, estimate_full_run, measure_pilot, retrieval_hours
from ..engine.ledger import read_ledger
from ..engine.state import replay
from .verify import MANIFEST, verify_bundle

SHOWN_FAILURES = 3


@dataclass(frozen=True)
class PriorRun:
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
    path: Path
    campaign: str
    manifest_sha256: str
    corpus_sha256: str | None
    bytes: int
    runs: tuple[PriorRun, ...]


def _params_json(params: dict) -> str:
    return json.dumps(params, sort_keys=True, default=str)


def refuse(shown: str, reason: str) -> PlanError:
    return PlanError([f"prior {shown}: refused: {reason}"])


def read_prior(bundle: Path, plan: Plan, shown: str | None = None) -> Prior:
    """The measured figures of a verified bundle of the same corpus, or PlanError."""
    shown = shown or str(bundle)
    if not (bundle / MANIFEST).is_file():
        raise refuse(shown, f"no {MANIFEST} there: not a bundle made by `itera-tui wrapup`")
    try:
        manifest = json.loads((bundle / MANIFEST).read_text())
    except (OSError, ValueError) as exc:
        raise refuse(shown, f"{MANIFEST} is unreadable ({exc})") from None
    if not isinstance(manifest, dict):
        raise refuse(shown, f"{MANIFEST} is not a JSON object")
    if manifest.get("verified") is False or _report_says_not_verified(bundle):
        raise refuse(shown, "the bundle is NOT VERIFIED (its wrap-up said so): measurements "
                            "from it cannot be trusted")
    result = verify_bundle(bundle, reload=False)
    if not result.verified:
        first = "; ".join(f"{f['path']}: {f['problem']}"
                          for f in result.failures[:SHOWN_FAILURES])
        more = len(result.failures) - SHOWN_FAILURES
        raise refuse(shown, f"it does not verify ({first}"
                            + (f"; and {more} more" if more > 0 else "") + ")")
    prior_plan = _frozen_plan(bundle, shown)
    theirs, ours = corpus_sha256(prior_plan.corpus), corpus_sha256(plan.corpus)
    if theirs != ours:
        raise refuse(shown, "it was measured on another corpus (corpus sha256 "
                            f"{_short(theirs)} there, {_short(ours)} here): its durations "
                            "say nothing about this one")
    state = replay(read_ledger(bundle / "ledger.jsonl"))
    runs = tuple(_prior_run(prior_plan, run, bundle / "runs" / run.id) for run in state.runs)
    size = sum(int(f.get("bytes") or 0) for f in manifest.get("files") or []
               if isinstance(f, dict)) + (bundle / MANIFEST).stat().st_size
    return Prior(bundle, prior_plan.campaign.name, sha256_file(bundle / MANIFEST)[0], theirs,
                 size, runs)


def _short(digest: str | None) -> str:
    return f"{digest[:12]}…" if digest else "none (no [corpus])"


def _report_says_not_verified(bundle: Path) -> bool:
    try:
        return "Verification: **NOT VERIFIED**" in (bundle / "report.md").read_text()
    except (OSError, UnicodeDecodeError):
        return False  # a missing report fails the verification itself


def _frozen_plan(bundle: Path, shown: str) -> Plan:
    try:
        raw = tomllib.loads((bundle / "plan.toml").read_text())
    except FileNotFoundError:
        raise refuse(shown, "it holds no frozen plan (plan.toml)") from None
    except (OSError, ValueError) as exc:
        raise refuse(shown, f"its plan.toml is unreadable ({exc})") from None
    try:
        return plan_from_dict(raw, bundle / "campaign.toml", check_files=False)
    except PlanError as exc:
        raise refuse(shown, f"its plan.toml does not load ({exc.problems[0]})") from None


def _prior_run(prior_plan: Plan, run, run_dir: Path) -> PriorRun:
    seconds = (run.ended_t - run.launched_t if run.ended_t is not None
               and run.launched_t is not None else None)
    measure = measure_pilot(prior_plan, run, run_dir) if run_dir.is_dir() else None
    return PriorRun(run.id, run.target, run.kind, run.state,
                    tuple(run.config.get("argv") or ()),
                    _params_json(dict(run.config.get("params") or {})), seconds, measure)


# -- calibration -------------------------------------------------------------------

def _matched(prior: Prior, target: str, argv: tuple[str, ...], params: dict,
             kinds: tuple[str, ...]) -> tuple[list[PriorRun], str]:
    """The prior's runs of the same variant or step: by id, else by command (+ params)."""
    same_id = [r for r in prior.runs if r.target == target and r.kind in kinds]
    if same_id:
        return same_id, "id"
    wanted = _params_json(params)
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


def prior_plan(plan: Plan, bundle: str | Path | None = None,
               calibrated: bool | None = None) -> Plan:
    """`plan` calibrated from `bundle` (default: its `[campaign] prior`, relative to the
    campaign folder); with `calibrated` (default: `[campaign] calibrated`) its calendar
    uses the calibrated durations. Its `raw` holds the `[calibration]` table, so a plan
    frozen from it records which durations were used. Unchanged without a prior."""
    if bundle is None:
        if plan.campaign.prior is None:
            return plan
        bundle = plan.root / plan.campaign.prior
    use = plan.campaign.calibrated if calibrated is None else calibrated
    prior = read_prior(Path(bundle), plan, shown=str(bundle))
    cal = calibrate(plan, prior, "calibrated" if use else "hand-written")
    return apply_calibration(replace(plan, raw=with_calibration_table(plan.raw, cal)), cal)


def campaign_plan(plan: Plan) -> Plan:
    """The plan an engine drives: once a campaign has started, its frozen plan's
    calibration (the prior is not read again, it may be gone); before, `prior_plan`."""
    frozen = plan.state_dir / "plan.toml"
    if not frozen.is_file():
        return prior_plan(plan)
    try:
        recorded = plan_from_dict(tomllib.loads(frozen.read_text()), plan.path,
                                  check_files=False).calibration
    except (OSError, ValueError, PlanError):
        return plan
    if recorded is None:
        return plan
    return apply_calibration(replace(plan, raw=with_calibration_table(plan.raw, recorded)),
                             recorded)
