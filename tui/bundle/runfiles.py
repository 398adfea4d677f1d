"""Which files of a run go into the bundle, and which checkpoint.

Per run: its parameters, raw measurements (metrics, probe samples, logs,
exit status), every deliverable it wrote (predictions, error analyses, files
the plan's `[deliverables]` names), its artifacts (top-level weights files:
SDK `*.pt` with their sidecars, and plain `torch.save`, Lightning `.ckpt` or
`.safetensors` files) and its last *verified* checkpoint, never all of them:
a resume needs one good checkpoint, and a bundle has to be copied off the box.
The checkpoint is the newest acknowledged one (SDK, watched, HF `checkpoint-N/`
directory or Lightning `.ckpt`) that verifies; one the ledger never saw
verified (the run ended first) is verified now, in the bundle's one verifier
process, before it is trusted.

Nothing outside the run directory gets in: a deliverable the plan names that
is a symbolic link is not bundled (nor accepted), a symbolic link that leaves it is
not followed and a checkpoint acknowledged outside it is not copied; each
refusal is recorded with its reason (the report lists them).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable

from ..campaign.files import sha256_file
from ..campaign.finetune_files import is_adapter
from ..campaign.held import held_path
from ..campaign.plan import Plan
from ..engine.conclusion.outcome import LINK, deliverable_problem, figure_bound
from ..engine.ledger.state import RunState
from .adapters import entry as adapter_entry
from ..engine.conclusion.outcome import readout_of
from .reload_check import Reloader
from .stage import Stager, safe_relative

RAW = {"params.json": "params", "metrics.jsonl": "metrics", "samples.jsonl": "samples",
       "stdout.log": "log", "stderr.log": "log", "exit.json": "exit"}
SKIPPED = {"control.jsonl"}  # engine requests to the run: bookkeeping, not results
WEIGHTS = (".pt", ".pth", ".bin", ".ckpt", ".safetensors")
MAX_TREE_FILES = 10_000
# a deliverable is a regular file of its run directory (engine.conclusion.outcome): a link
# names something the run does not hold, so it is named here and never counted
LINKED_DELIVERABLE = "a deliverable that is a symbolic link: not bundled, not accepted"


@dataclass
class RunFiles:
    run: str
    checkpoint: str | None = None  # bundle-relative (a file, or a checkpoint directory)
    checkpoint_step: int | None = None
    checkpoint_note: str | None = None
    artifacts: list[str] = field(default_factory=list)
    not_copied: list[str] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)  # {"path", "reason"}
    adapters: list[dict] = field(default_factory=list)  # bundle.adapters.entry records
    # cut on a box the campaign moved away from, and nothing of it reached this box (no
    # verified checkpoint, no records in the store): why its folder is not in the bundle
    left_behind: str | None = None


def deliverable_kind(name: str, planned: set[str]) -> str:
    low = name.lower()
    if low.endswith(WEIGHTS):
        return "artifact"
    if low.startswith("predictions") or low.startswith("preds"):
        return "predictions"
    if "error_analysis" in low or low.startswith("errors"):
        return "error_analysis"
    return "deliverable" if name in planned else "output"


def _temporary(name: str) -> bool:
    return name.startswith(".") or name.endswith(".tmp") or ".tmp-" in name or name.endswith("~")


def inside(run_dir: Path, path: Path) -> bool:
    """Whether `path`, every symbolic link followed, stays in `run_dir`."""
    home = os.path.realpath(run_dir)
    return os.path.commonpath([home, os.path.realpath(path)]) == home


def _refuse(out: RunFiles, path: str, reason: str) -> None:
    out.refused.append({"path": path, "reason": reason})


def copy_run(plan: Plan, run: RunState, run_dir: Path, stager: Stager,
             progress: Callable[[str], None], reload_cache: dict | None = None,
             reloader: Reloader | None = None) -> RunFiles:
    """Copy one run's files; a checkpoint reloaded here seeds `reload_cache`
    ((bundle path, sha256) -> verdict) so the bundle check does not load it twice."""
    base = f"runs/{run.id}"
    out = RunFiles(run.id)
    planned = set(plan.deliverables.files)
    names = sorted(p.name for p in run_dir.iterdir()) if run_dir.is_dir() else []
    for name in names:
        src = run_dir / name
        if name in planned and src.is_symlink():
            _refuse(out, name, LINKED_DELIVERABLE)
            continue
        if not inside(run_dir, src):
            _refuse(out, name, "a symbolic link out of the run directory: not followed")
            continue
        if src.is_dir():
            found = _adapter_folders(src, name) if name != "checkpoints" else []
            for rel in found:
                _copy_adapter(run_dir, rel, base, stager, out, reloader, plan.root)
            if name != "checkpoints" and not found and not any(
                    d.startswith(name + "/") for d in planned):
                out.not_copied.append(name + "/")
            continue
        if name in SKIPPED or _temporary(name) or not src.is_file():
            continue
        if name in RAW:
            stager.copy(src, f"{base}/{name}", RAW[name], run.id)
        elif name.lower().endswith(WEIGHTS):
            if stager.copy(src, f"{base}/{name}", "artifact", run.id):
                out.artifacts.append(f"{base}/{name}")
        elif name.endswith(".pt.json"):
            stager.copy(src, f"{base}/{name}", "sidecar", run.id)
        else:
            stager.copy(src, f"{base}/{name}", deliverable_kind(name, planned), run.id)
    for rel in sorted(planned):  # nested deliverables ("eval/preds.jsonl")
        if "/" in rel and safe_relative(rel):
            if (run_dir / rel).exists() and not inside(run_dir, run_dir / rel):
                _refuse(out, rel, "a symbolic link out of the run directory: not followed")
                continue
            if deliverable_problem(run_dir, rel) == LINK:
                _refuse(out, rel, LINKED_DELIVERABLE)
                continue
            kind = deliverable_kind(Path(rel).name, planned)
            if stager.copy(run_dir / rel, f"{base}/{rel}", kind, run.id) and kind == "artifact":
                out.artifacts.append(f"{base}/{rel}")
    delivered = readout_of(plan, run, run_dir).delivered
    _copy_checkpoint(run, run_dir, stager, out, progress,
                     {} if reload_cache is None else reload_cache, reloader, plan.root,
                     delivered.path if delivered else None)
    if out.checkpoint:  # a folder holding the bundled checkpoint was (partly) copied
        held = out.checkpoint[len(base) + 1:] + "/"
        out.not_copied = [d for d in out.not_copied if not held.startswith(d)]
    if run.moved and run.state == "cut" and not any(rel.startswith(base + "/")
                                                    for rel in stager.entries):
        out.left_behind = ("cut when its box went away; nothing of it reached the store "
                           "(no verified checkpoint, no records), so it has no folder here")
    return out


def _adapter_folders(src: Path, name: str) -> list[str]:
    """A folder of the run that is a PEFT adapter, or holds one (not a checkpoint-N/)."""
    if is_adapter(src):
        return [name]
    try:
        children = sorted(p for p in src.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    return [f"{name}/{p.name}" for p in children
            if not p.name.startswith("checkpoint-") and is_adapter(p)]


def _verify_now(reloader: Reloader | None, src: Path, code_dir: Path) -> dict:
    if reloader is not None:
        return reloader.one(src, code_dir=code_dir)
    with Reloader() as own:
        return own.one(src, code_dir=code_dir)


def _copy_adapter(run_dir: Path, rel: str, base: str, stager: Stager, out: RunFiles,
                  reloader: Reloader | None, code_dir: Path) -> None:
    """An adapter the run saved: bundled as one artifact once it verifies, else refused."""
    src = run_dir / rel
    tree = _tree(src, run_dir)
    if isinstance(tree, str):
        _refuse(out, rel + "/", tree)
        return
    verdict = _verify_now(reloader, src, code_dir)
    if not verdict.get("ok"):
        _refuse(out, rel + "/", f"adapter not usable, not bundled: {verdict.get('problem')}")
        return
    target = f"{base}/{rel}"
    for p in tree:
        stager.copy(p, f"{target}/{p.relative_to(src).as_posix()}", "artifact", out.run,
                    unit=target)
    out.artifacts.append(target)
    if verdict.get("adapter"):
        out.adapters.append(adapter_entry(target, "artifact", verdict["adapter"]))


def deliverable_failures(plan: Plan, state, failures: list[dict]) -> dict[str, str]:
    """run id -> the first failure of one of its deliverables (a file the plan's
    `[deliverables]` names, or a weights file the run wrote at its top), as the bundle's
    check found it: such a run is not an accepted deliverable."""
    planned = set(plan.deliverables.files)
    ids = {run.id for run in state.runs}
    out: dict[str, str] = {}
    for failure in failures:
        parts = str(failure.get("path", "")).split("/", 2)
        if len(parts) < 3 or parts[0] != "runs" or parts[1] not in ids:
            continue
        rel = parts[2]
        if rel in planned or ("/" not in rel and rel.lower().endswith(WEIGHTS)):
            out.setdefault(parts[1], f"{rel} {failure.get('problem')}")
    return out


def _shown(path: str) -> str:
    """An acknowledged path as the bundle may show it: never a path of this machine."""
    return f"<absolute path>/{PurePosixPath(path).name}" if os.path.isabs(path) else path


def _candidates(run: RunState, run_dir: Path, out: RunFiles) -> list[tuple[str, int | None]]:
    """(path relative to the run dir, step), newest first: acknowledged, then on disk."""
    seen, result = set(), []
    for ack in reversed(run.checkpoints):
        path = ack.path
        if not isinstance(path, str) or not path or path in seen:
            continue
        seen.add(path)
        if not safe_relative(path.rstrip("/")) or not inside(run_dir, run_dir / path):
            _refuse(out, _shown(path), "checkpoint acknowledged outside the run directory: "
                                       "not copied")
            continue
        result.append((path.rstrip("/"), ack.step))
    ckpt_dir = run_dir / "checkpoints"
    if ckpt_dir.is_dir() and inside(run_dir, ckpt_dir):
        for p in sorted(ckpt_dir.glob("*.pt"), reverse=True):
            rel = f"checkpoints/{p.name}"
            if rel not in seen and not _temporary(p.name):
                seen.add(rel)
                result.append((rel, None))
    return result


def _tree(src: Path, run_dir: Path) -> list[Path] | str:
    """The files of a checkpoint directory, or why it cannot be bundled."""
    files = []
    for dirpath, dirnames, filenames in os.walk(src):
        for name in sorted(filenames) + [d for d in dirnames
                                         if os.path.islink(os.path.join(dirpath, d))]:
            path = Path(dirpath) / name
            if not inside(run_dir, path):
                return "holds a symbolic link out of the run directory: not copied"
            files.append(path)
        if len(files) > MAX_TREE_FILES:
            return f"over {MAX_TREE_FILES} files: not a checkpoint directory"
    return sorted(files) if files else "an empty directory"


def _copy_checkpoint(run: RunState, run_dir: Path, stager: Stager, out: RunFiles,
                     progress: Callable[[str], None], cache: dict,
                     reloader: Reloader | None, code_dir: Path,
                     delivered: str | None = None) -> None:
    """The newest checkpoint that verifies, or the one the run delivers (`delivered`:
    HF's load_best_model_at_end reloaded it at the end), tried first."""
    verdicts: dict[str, dict] = {}
    for v in run.verified:  # the last verdict per path wins
        verdicts[v.path] = v.to_dict()
    rejected = []
    candidates = _candidates(run, run_dir, out)
    if delivered is not None:
        candidates.sort(key=lambda c: c[0] != delivered)  # stable: the rest keep their order
    if not candidates:
        out.checkpoint_note = "no checkpoint written" if not out.refused else \
            "no checkpoint inside the run directory"
        return
    bound = figure_bound(run)  # a pilot bundles what it was at its bound, never past it
    watched = {a.path for a in run.checkpoints if a.mode == "watched"}  # rewritten in place?
    for rel, step in candidates:
        if bound is not None and step is not None and step > bound:
            rejected.append(f"{rel}: step {step}, past the pilot's bound of {bound} steps")
            continue
        verdict, fresh = verdicts.get(rel) or verdicts.get(rel + "/"), False
        src = _verified_copy(run_dir, verdict) or run_dir / rel
        tree = _tree(src, run_dir) if src.is_dir() else None
        if isinstance(tree, str):
            rejected.append(f"{rel}: {tree}")
            continue
        if tree is None and not src.is_file():
            rejected.append(f"{rel}: no longer on disk")
            continue
        if tree is None and src == run_dir / rel and rel in watched and _rewritten(src, verdict):
            verdict = None  # another save over the one verified: verified now, as it is
        if verdict is None:
            progress(f"verifying checkpoint {rel} of {run.id} (never verified during the run)")
            own = reloader is None
            reloader = reloader or Reloader()
            try:
                verdict, fresh = reloader.one(src, code_dir=code_dir), True
            finally:
                if own:
                    reloader.close()
                    reloader = None
        if not verdict.get("ok"):
            rejected.append(f"{rel}: {verdict.get('problem')}")
            continue
        said = verdict.get("step")
        if bound is not None and isinstance(said, int) and said > bound:
            rejected.append(f"{rel}: step {said}, past the pilot's bound of {bound} steps")
            continue
        target = f"runs/{run.id}/{rel}"
        if tree is not None:
            for p in tree:
                stager.copy(p, f"{target}/{p.relative_to(src).as_posix()}", "checkpoint",
                            run.id, unit=target)
        else:
            entry = stager.copy(src, target, "checkpoint", run.id)
            if entry is None:
                continue
            sidecar = (run_dir / rel).with_name(src.name + ".json")
            side = stager.copy(sidecar, target + ".json", "sidecar", run.id) \
                if sidecar.is_file() else None
            if fresh and entry.source_sha256 is None and (side is None
                                                          or side.source_sha256 is None):
                cache[(target, entry.sha256)] = verdict  # the same bytes, just reloaded
        out.checkpoint = target
        if tree is not None and is_adapter(src):
            if not verdict.get("adapter"):  # the ledger keeps no adapter facts: check now
                verdict = _verify_now(reloader, src, code_dir)
            if verdict.get("adapter"):
                out.adapters.append(adapter_entry(target, "checkpoint", verdict["adapter"]))
        out.checkpoint_step = verdict.get("step") if verdict.get("step") is not None else step
        if out.checkpoint_step is None and tree is None:
            out.checkpoint_step = _sidecar_step(src.with_name(src.name + ".json"))
        break
    if out.checkpoint is None:
        out.checkpoint_note = ("no verified checkpoint" + (f" ({'; '.join(rejected)})"
                                                           if rejected else ""))


def _verified_copy(run_dir: Path, verdict: dict | None) -> Path | None:
    """The engine's copy of the checkpoint its verdict read (a watched file rewritten in
    place changes after it), when it kept one: the bytes acknowledged and verified."""
    if not verdict or not verdict.get("ok"):
        return None
    return held_path(run_dir, verdict.get("held"))


def _rewritten(src: Path, verdict: dict | None) -> bool:
    """Whether the file no longer holds the bytes its verdict names (its sha256)."""
    said = (verdict or {}).get("sha256")
    if not said:
        return False
    try:
        return sha256_file(src)[0] != said
    except OSError:
        return False  # unreadable: the copy below says so


def _sidecar_step(sidecar: Path) -> int | None:
    try:
        step = json.loads(sidecar.read_text()).get("step")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None
    return step if isinstance(step, int) else None
