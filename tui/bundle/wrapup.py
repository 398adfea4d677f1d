"""Build the campaign's bundle: a directory that reloads, explains and accounts.

Called after every run has stopped (tui.engine.headless.finish_wrapup). The
bundle is built in a sibling temp directory inside the outputs directory and
swapped in only once complete, so a crash mid-build never leaves half a
bundle where the previous one was. It holds the frozen plan, the ledger, per
run its parameters, raw measurements, deliverables, artifacts and last
verified checkpoint, stops.json, RELOAD.md, loss_curves.svg, report.md and
manifest.json (size, sha256 and kind of every other file).

Order, so the hashes stay valid: everything but the report is written and
verified (including the fresh-process reloads); then the report is written
with that verdict, the manifest is written over all files, and the cheap
checks run again over the whole bundle (reloads come from the cache). If
that final pass disagrees, the report is rewritten with the final verdict.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from .. import __version__
from ..campaign.load import plan_from_dict
from ..campaign.plan import Plan
from ..engine.ledger import read_ledger
from ..engine.outcome import budget, conclude, final_metric, rejection_cause
from ..engine.state import replay
from . import actual, reloaddoc, report, svg
from .paths import Scrubber
from .runfiles import copy_run
from .stage import Stager
from .verify import MANIFEST, verify_bundle

STAGING_PREFIX = ".bundle-staging-"
OLD_PREFIX = ".bundle-old-"


@dataclass(frozen=True)
class BundleResult:
    bundle_dir: Path
    bundle_rel: str  # relative to the campaign directory, posix
    verified: bool
    failures: list[dict]
    bytes: int


def frozen_plan(plan: Plan) -> tuple[Plan, bytes | None]:
    """The plan as frozen at campaign start (what was planned), and its bytes."""
    path = plan.state_dir / "plan.toml"
    data = None
    try:
        data = path.read_bytes()
        return plan_from_dict(tomllib.loads(data.decode()), plan.path, check_files=False), data
    except FileNotFoundError:
        return plan, None
    except Exception:  # a frozen plan this version cannot read: keep its bytes, plan as given
        return plan, data


def _clean_leftovers(outputs: Path) -> None:
    for p in outputs.glob(".bundle-*"):
        if p.name.startswith((STAGING_PREFIX, OLD_PREFIX)) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)


def build_bundle(plan: Plan, progress: Callable[[str], None] | None = None) -> BundleResult:
    say = progress or (lambda msg: None)
    planned, frozen_bytes = frozen_plan(plan)
    events = read_ledger(plan.state_dir / "ledger.jsonl")
    state = replay(events)
    runs_dir = plan.state_dir / "runs"
    outputs = plan.outputs_dir
    outputs.mkdir(parents=True, exist_ok=True)
    _clean_leftovers(outputs)
    staging = outputs / f"{STAGING_PREFIX}{os.getpid()}"
    staging.mkdir()
    final = outputs / "bundle"
    bundle_rel = final.relative_to(plan.root).as_posix()
    try:
        stager = Stager(staging, Scrubber(plan.root))
        if frozen_bytes is not None:
            stager.copy(plan.state_dir / "plan.toml", "plan.toml", "plan")
        stager.copy(plan.state_dir / "ledger.jsonl", "ledger.jsonl", "ledger")
        runs, cache = [], {}
        for i, run in enumerate(state.runs, 1):
            say(f"copying run {run.id} ({i}/{len(state.runs)})")
            files = copy_run(planned, run, runs_dir / run.id, stager, say, cache)
            runs.append(_run_entry(planned, run, runs_dir / run.id, files))
        stops = [_stop_entry(run) for run in state.runs if run.stop is not None]
        stager.write_text("stops.json", json.dumps(stops, indent=2) + "\n", "stops")
        say("drawing loss curves")
        stager.write_text("loss_curves.svg", svg.render(planned, list(state.runs), runs_dir),
                          "figure")
        stager.write_text("RELOAD.md", reloaddoc.render(staging, runs), "reload")
        head = _manifest_head(planned, state, runs, frozen_bytes)
        say(f"hashed {len(stager.entries)} files; verifying")
        _write_manifest(staging, head, stager)
        first = verify_bundle(staging, progress=say, reload_cache=cache)
        context = dict(pva=actual.compare(planned, state, events),
                       budget=budget(planned, state, runs_dir),
                       conclusion=conclude(planned, state, runs_dir))
        say("writing the report")
        result = first
        for _ in range(3):
            _write_report(staging, stager, head, planned, runs, context, result, bundle_rel)
            again = verify_bundle(staging, reload_cache=cache)
            if again.failures == result.failures:
                break
            result = again
        total = _bundle_bytes(staging)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    _swap_in(staging, final)
    say(f"bundle {'VERIFIED' if again.verified else 'NOT VERIFIED'}: {bundle_rel} "
        f"({report.human_bytes(total)})")
    return BundleResult(final, bundle_rel, again.verified, again.failures, total)


def _run_entry(plan: Plan, run, run_dir: Path, files) -> dict:
    params = dict(run.config.get("params") or {})
    try:
        params = plan.variant(run.target).params_dict | params
    except KeyError:
        pass
    duration = (run.ended_t - run.launched_t if run.ended_t is not None
                and run.launched_t is not None else None)
    entry = {"id": run.id, "variant": run.target, "kind": run.kind, "category": run.category,
             "attempt": run.attempt, "config_hash": run.config_hash, "state": run.state,
             "exit_code": run.exit_code, "stop": run.stop.to_dict() if run.stop else None,
             "launched_t": run.launched_t,
             "ended_t": run.ended_t, "duration_s": None if duration is None
             else round(duration, 3), "final_metric": final_metric(plan, run_dir),
             "checkpoints_acknowledged": len(run.checkpoints), "checkpoint": files.checkpoint,
             "checkpoint_step": files.checkpoint_step, "artifacts": files.artifacts}
    if files.checkpoint_note:
        entry["checkpoint_note"] = files.checkpoint_note
    if files.not_copied:
        entry["not_copied"] = files.not_copied
    if run.kind == "run":
        cause = rejection_cause(plan, run, run_dir)
        entry["accepted"] = cause is None
        if cause:
            entry["rejection"] = cause
    for key in ("base_model", "base_model_revision"):
        if params.get(key) is not None:
            entry[key] = str(params[key])
    return entry


def _stop_entry(run) -> dict:
    stop = run.stop
    return {"id": run.id, "variant": run.target, "kind": run.kind, "state": run.state,
            "rule": stop.rule, "value": stop.value, "step": stop.step,
            "time": actual.utc(stop.t), "t": stop.t, "reason": stop.reason}


def _manifest_head(plan: Plan, state, runs: list[dict], frozen_bytes: bytes | None) -> dict:
    import hashlib

    c = plan.campaign
    return {"format": "itera-bundle/1", "tool": {"name": "itera-tui", "version": __version__},
            "created": actual.utc(time.time()),
            "campaign": {"name": c.name, "question": c.question, "metric": c.metric,
                         "control": c.control},
            "plan": {"path": "plan.toml" if frozen_bytes is not None else None,
                     "sha256": hashlib.sha256(frozen_bytes).hexdigest() if frozen_bytes
                     else None, "campaign_toml_sha256_at_start": state.plan_sha256},
            "lots": plan.order_references(),
            "calibration": plan.calibration.to_dict() if plan.calibration else None,
            "run_ids": [r["id"] for r in runs], "runs": runs,
            "paths": Scrubber.note()}


def _write_manifest(staging: Path, head: dict, stager: Stager) -> None:
    body = dict(head, files=stager.listing(), omitted=stager.omitted)
    text = stager.scrubber.text(json.dumps(body, indent=2, default=str) + "\n")
    tmp = staging / (MANIFEST + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, staging / MANIFEST)


def _write_report(staging, stager, head, planned, runs, context, result, bundle_rel) -> None:
    files = len(stager.entries.keys() | {"report.md"}) + 1  # + the manifest
    verdict = report.Verdict(result.verified, tuple(result.failures), files, result.reloaded)
    size = 0
    for _ in range(5):  # the report states the bundle size, which includes the report
        text = report.render(planned, runs, context["pva"], context["budget"],
                             context["conclusion"], verdict, size_bytes=size, files=files,
                             bundle_rel=bundle_rel, plan_sha256=head["plan"]["sha256"],
                             tool_version=__version__)
        stager.write_text("report.md", text, "report")
        _write_manifest(staging, head, stager)
        now = _bundle_bytes(staging)
        if now == size:
            break
        size = now


def _bundle_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _swap_in(staging: Path, final: Path) -> None:
    """Replace the previous bundle only now that the new one is complete."""
    old = None
    if final.exists():
        old = final.with_name(f"{OLD_PREFIX}{os.getpid()}")
        os.replace(final, old)
    try:
        os.replace(staging, final)
    except OSError:
        if old is not None:
            os.replace(old, final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
    try:
        fd = os.open(final.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
