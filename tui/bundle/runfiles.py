"""Which files of a run go into the bundle, and which checkpoint.

Per run: its parameters, raw measurements (metrics, probe samples, logs,
exit status), every deliverable it wrote (predictions, error analyses, files
the plan's `[deliverables]` names), its artifacts (top-level `*.pt` with their
sidecars) and its last *verified* checkpoint, never all of them: a resume
needs one good checkpoint, and a bundle has to be copied off the box. A
checkpoint the ledger acknowledged but never saw verified (the run ended
first) is verified now, in a fresh process, before it is trusted.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..campaign.plan import Plan
from ..engine.state import RunState
from .reload import reload_one
from .stage import Stager, safe_relative

RAW = {"params.json": "params", "metrics.jsonl": "metrics", "samples.jsonl": "samples",
       "stdout.log": "log", "stderr.log": "log", "exit.json": "exit"}
SKIPPED = {"control.jsonl"}  # engine requests to the run: bookkeeping, not results


@dataclass
class RunFiles:
    run: str
    checkpoint: str | None = None  # bundle-relative
    checkpoint_step: int | None = None
    checkpoint_note: str | None = None
    artifacts: list[str] = field(default_factory=list)
    not_copied: list[str] = field(default_factory=list)


def deliverable_kind(name: str, planned: set[str]) -> str:
    low = name.lower()
    if low.startswith("predictions") or low.startswith("preds"):
        return "predictions"
    if "error_analysis" in low or low.startswith("errors"):
        return "error_analysis"
    return "deliverable" if name in planned else "output"


def _temporary(name: str) -> bool:
    return name.startswith(".") or name.endswith(".tmp") or ".tmp-" in name or name.endswith("~")


def copy_run(plan: Plan, run: RunState, run_dir: Path, stager: Stager,
             progress: Callable[[str], None], reload_cache: dict | None = None) -> RunFiles:
    """Copy one run's files; a checkpoint reloaded here seeds `reload_cache`
    ((bundle path, sha256) -> verdict) so the bundle check does not load it twice."""
    base = f"runs/{run.id}"
    out = RunFiles(run.id)
    planned = set(plan.deliverables.files)
    names = sorted(p.name for p in run_dir.iterdir()) if run_dir.is_dir() else []
    for name in names:
        src = run_dir / name
        if src.is_dir():
            if name != "checkpoints" and not any(d.startswith(name + "/") for d in planned):
                out.not_copied.append(name + "/")
            continue
        if name in SKIPPED or _temporary(name) or not src.is_file():
            continue
        if name in RAW:
            stager.copy(src, f"{base}/{name}", RAW[name], run.id)
        elif name.endswith(".pt"):
            if stager.copy(src, f"{base}/{name}", "artifact", run.id):
                out.artifacts.append(f"{base}/{name}")
        elif name.endswith(".pt.json"):
            stager.copy(src, f"{base}/{name}", "sidecar", run.id)
        else:
            stager.copy(src, f"{base}/{name}", deliverable_kind(name, planned), run.id)
    for rel in sorted(planned):  # nested deliverables ("eval/preds.jsonl")
        if "/" in rel and safe_relative(rel):
            stager.copy(run_dir / rel, f"{base}/{rel}", deliverable_kind(Path(rel).name, planned),
                        run.id)
    _copy_checkpoint(run, run_dir, stager, out, progress,
                     {} if reload_cache is None else reload_cache)
    return out


def _candidates(run: RunState, run_dir: Path) -> list[tuple[str, int | None]]:
    """(path relative to the run dir, step), newest first: acknowledged, then on disk."""
    seen, out = set(), []
    for ack in reversed(run.checkpoints):
        path = ack.path
        if path and path not in seen:
            seen.add(path)
            out.append((path, ack.step))
    ckpt_dir = run_dir / "checkpoints"
    if ckpt_dir.is_dir():
        for p in sorted(ckpt_dir.glob("*.pt"), reverse=True):
            rel = f"checkpoints/{p.name}"
            if rel not in seen and not _temporary(p.name):
                seen.add(rel)
                out.append((rel, None))
    return out


def _copy_checkpoint(run: RunState, run_dir: Path, stager: Stager, out: RunFiles,
                     progress: Callable[[str], None], cache: dict) -> None:
    verdicts: dict[str, dict] = {}
    for v in run.verified:  # the last verdict per path wins
        verdicts[v.path] = v.to_dict()
    rejected = []
    candidates = _candidates(run, run_dir)
    if not candidates:
        out.checkpoint_note = "no checkpoint written"
        return
    for rel, step in candidates:
        src = run_dir / rel
        if not src.is_file():
            rejected.append(f"{rel}: no longer on disk")
            continue
        verdict, fresh = verdicts.get(rel), False
        if verdict is None:
            progress(f"verifying checkpoint {rel} of {run.id} (never verified during the run)")
            verdict, fresh = reload_one(src), True
        if not verdict.get("ok"):
            rejected.append(f"{rel}: {verdict.get('problem')}")
            continue
        name = Path(rel).name
        target = f"runs/{run.id}/checkpoints/{name}"
        entry = stager.copy(src, target, "checkpoint", run.id)
        if entry is None:
            continue
        sidecar = src.with_name(src.name + ".json")
        side = stager.copy(sidecar, target + ".json", "sidecar", run.id)
        if fresh and side is not None and side.source_sha256 is None:
            cache[(target, entry.sha256)] = verdict  # the same bytes, just reloaded
        out.checkpoint = target
        out.checkpoint_step = verdict.get("step") if verdict.get("step") is not None else step
        if out.checkpoint_step is None:
            out.checkpoint_step = _sidecar_step(sidecar)
        break
    if out.checkpoint is None:
        out.checkpoint_note = ("no verified checkpoint" + (f" ({'; '.join(rejected)})"
                                                           if rejected else ""))


def _sidecar_step(sidecar: Path) -> int | None:
    try:
        step = json.loads(sidecar.read_text()).get("step")
    except (OSError, ValueError, AttributeError):
        return None
    return step if isinstance(step, int) else None
