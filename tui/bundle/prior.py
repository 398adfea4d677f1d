"""Reading an earlier campaign's bundle as evidence for the next plan (`check --prior`).

This module is the bundle side of planning from a prior: it reads a bundle
(the manifest, the frozen plan and ledger copies, each run's metrics files),
checks it may be trusted, and hands planning one small record, a
`tui.campaign.prior.Prior`. Matching the prior's runs to the new plan's tasks
and calibrating the plan is planning, in `tui.campaign.prior`.

Evidence must be trustworthy and about the same data: a bundle that is not
verified (its report says so, or its files no longer match its manifest) or
that was measured on another corpus is refused with the reason (`PlanError`,
exit status 2).

It lives in `tui/bundle` because it reads the bundle's format, runs the bundle
check and reuses the engine's measurement of a run's files
(`tui.engine.estimate.measure_pilot`), which `tui/campaign`, the lowest layer,
may not import. A started campaign never comes here: its frozen plan recorded
the calibration (`tui.campaign.prior.recorded_plan`).
"""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from ..campaign.calibration import corpus_sha256
from ..campaign.files import sha256_file
from ..campaign.loading.load import plan_from_dict
from ..campaign.plan import Plan
from ..campaign.prior import Prior, PriorRun, params_json, plan_from_prior, recorded_plan
from ..campaign.validate import PlanError
from ..engine.estimate import measure_pilot
from ..engine.ledger.file import read_ledger
from ..engine.ledger.state import replay
from .bundle_check import MANIFEST, verify_bundle

SHOWN_FAILURES = 3


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
                    params_json(dict(run.config.get("params") or {})), seconds, measure)


def prior_plan(plan: Plan, bundle: str | Path | None = None,
               calibrated: bool | None = None) -> Plan:
    """`plan` calibrated from `bundle` (default: its `[campaign] prior`, relative to the
    campaign folder); with `calibrated` (default: `[campaign] calibrated`) its calendar
    uses the calibrated durations. Unchanged without a prior."""
    if bundle is None:
        if plan.campaign.prior is None:
            return plan
        bundle = plan.root / plan.campaign.prior
    return plan_from_prior(plan, read_prior(Path(bundle), plan, shown=str(bundle)),
                           calibrated)


def campaign_plan(plan: Plan) -> Plan:
    """The plan an engine drives: once a campaign has started, its frozen plan's
    calibration (the prior is not read again, it may be gone); before, `prior_plan`."""
    if (plan.state_dir / "plan.toml").is_file():
        return recorded_plan(plan)
    return prior_plan(plan)
