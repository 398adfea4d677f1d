"""What the manifest says of each run: its figures, files, stop and acceptance.

One entry per launched run, written by the wrap-up (tui.bundle.wrapup) into
manifest.json and read back by the report's runs table; the acceptance comes
from tui.engine.conclusion.outcome, the one place that decides what counts.
"""

from __future__ import annotations

from pathlib import Path

from ..campaign.plan import Plan
from ..engine.conclusion.outcome import readout_of, rejection_cause
from . import actual, adapters, truncation


def run_entry(plan: Plan, run, run_dir: Path, files, unverified: dict) -> dict:
    params = dict(run.config.get("params") or {})
    try:
        params = plan.variant(run.target).params_dict | params
    except KeyError:
        pass
    duration = (run.ended_t - run.launched_t if run.ended_t is not None
                and run.launched_t is not None else None)
    readout = readout_of(plan, run, run_dir)
    entry = {"id": run.id, "variant": run.target, "kind": run.kind, "category": run.category,
             "attempt": run.attempt, "config_hash": run.config_hash, "state": run.state,
             "exit_code": run.exit_code, "stop": run.stop.to_dict() if run.stop else None,
             "launched_t": run.launched_t,
             "ended_t": run.ended_t, "duration_s": None if duration is None
             else round(duration, 3),
             "final_metric": readout.final_metric,  # a pilot: at its bound; HF: the delivered
             "checkpoints_acknowledged": len(run.checkpoints), "checkpoint": files.checkpoint,
             "checkpoint_step": files.checkpoint_step, "artifacts": files.artifacts}
    entry |= run.retry_dict()  # `[retry]`: a retry, a failure retried, a hiccup left
    if files.checkpoint_note:
        entry["checkpoint_note"] = files.checkpoint_note
    if readout.delivered is not None:  # load_best_model_at_end: figure and bundle are its
        d = readout.delivered
        entry["delivered"] = {"path": d.path, "step": d.step, "metric": d.metric,
                              "value": d.value, "text": d.text(),
                              "bundled": files.checkpoint == f"runs/{run.id}/{d.path}"}
    if files.not_copied:
        entry["not_copied"] = files.not_copied
    if files.left_behind:
        entry["left_behind"] = files.left_behind
    if files.refused:
        entry["refused"] = files.refused
    if run.kind == "run":
        cause = rejection_cause(plan, run, run_dir, unverified)
        entry["accepted"] = cause is None
        if cause:
            entry["rejection"] = cause
    entry |= adapters.run_fields(files.adapters) | truncation.run_fields(run_dir)
    for key in ("base_model", "base_model_revision"):  # typed by hand: the person's word wins
        if params.get(key) is not None:
            entry[key] = str(params[key])
    return entry


def stop_entry(run) -> dict:
    stop = run.stop
    return {"id": run.id, "variant": run.target, "kind": run.kind, "state": run.state,
            "rule": stop.rule, "value": stop.value, "step": stop.step,
            "time": actual.utc(stop.t), "t": stop.t, "reason": stop.reason}
