"""Build the campaign's bundle: a directory that reloads, explains and accounts.

Called after every run has stopped, by the wrap-up job (tui.session.wrapup.WrapupJob). The
bundle is built in a sibling temp directory inside the outputs directory and
swapped in only once complete, so a crash mid-build never leaves half a
bundle where the previous one was. It holds the frozen plan, the ledger, per
run its parameters, raw measurements, deliverables, artifacts and last
verified checkpoint, stops.json, RELOAD.md, the figures (loss_curves and
quality as PNG and SVG, drawn by matplotlib in a fresh process: plots.py),
report.md and manifest.json (size, sha256 and kind of every other file).

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
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from .. import __version__
from ..campaign.frozen import edits_since_start
from ..campaign.loading.load import plan_from_dict
from ..campaign.notify_plan import token_parts
from ..campaign.plan import THIS_BOX, Plan
from ..campaign.validate import PlanError
from ..engine.ledger.file import read_ledger
from ..engine.conclusion.outcome import budget, conclude
from ..engine.ledger.state import replay
from ..engine.conclusion.verdict import verdict_of
from . import actual, plots, reloaddoc, report
from .code import artifact_entries, keep_code, sdk_artifacts
from .helpers import HostHelpers, WrapupHelpers
from .merge import merge_parts
from .parts import RunDirectories, boxes_section
from .paths import LogRedactor, Scrubber, without_paths
from .reload_check import Reloader
from .entries import run_entry, stop_entry
from .runfiles import copy_run, deliverable_failures
from .swap import OLD_PREFIX, bundle_bytes, swap_in
from .stage import DiskFull, Stager, full_disk_named
from .bundle_check import MANIFEST, verify_bundle

TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")

STAGING_PREFIX = ".bundle-staging-"


@dataclass(frozen=True)
class BundleResult:
    bundle_dir: Path
    bundle_rel: str  # relative to the campaign directory, posix
    verified: bool
    failures: list[dict]
    bytes: int
    error: str | None = None  # the wrap-up could not finish (a full disk): what and where
    unverified: dict = field(default_factory=dict)  # run id -> its deliverable's failure


def frozen_plan(plan: Plan, say: Callable[[str], None] | None = None
                ) -> tuple[Plan, bytes | None]:
    """The plan as frozen at campaign start (what was planned; an edit of campaign.toml
    since is named in its edited_keys, never used), and its bytes. A frozen
    plan this version cannot read keeps its bytes in the bundle, the comparison uses the
    plan as given, and `say` is told so."""
    path = plan.state_dir / "plan.toml"
    data = None
    try:
        raw = tomllib.loads((data := path.read_bytes()).decode())
        planned = plan_from_dict(raw, plan.path, check_files=False)
        return replace(planned, edited_keys=edits_since_start(plan.path, raw)), data
    except FileNotFoundError:
        return plan, None
    except (OSError, ValueError, RecursionError, PlanError) as exc:  # ValueError: TOML, UTF-8
        if say is not None:  # an OSError's text names the absolute path: its reason only
            why = exc.strerror if isinstance(exc, OSError) else exc
            say(f".itera/plan.toml cannot be read ({why}); planned vs actual compares "
                "with campaign.toml as it is now (the frozen bytes are kept in the bundle)")
        return plan, data


def _clean_leftovers(outputs: Path) -> None:
    for p in outputs.glob(".bundle-*"):
        if p.name.startswith((STAGING_PREFIX, OLD_PREFIX)) and p.is_dir():
            shutil.rmtree(p, ignore_errors=True)


def build_bundle(plan: Plan, progress: Callable[[str], None] | None = None,
                 parts: tuple = (), store_url: str | None = None,
                 helpers: WrapupHelpers | None = None) -> BundleResult:
    """Build, verify and swap in the bundle. A full disk is a result, not a traceback:
    the staging is removed, the previous bundle kept, and the failure says where.
    `parts`: the other boxes' parts (bundle.parts.Part) merged into this one bundle.
    `store_url`: where the delivery puts it (`[store]`), which the report names.
    `helpers`: how git, the drawer and the verifier are started (tui/bundle/helpers.py;
    the box's own when None)."""
    say = progress or (lambda msg: None)
    helpers = helpers or HostHelpers()
    outputs = plan.outputs_dir
    final = outputs / "bundle"
    bundle_rel = final.relative_to(plan.root).as_posix()
    staging = outputs / f"{STAGING_PREFIX}{os.getpid()}"
    try:
        with full_disk_named(bundle_rel):
            outputs.mkdir(parents=True, exist_ok=True)
            _clean_leftovers(outputs)
            staging.mkdir()
        with helpers.reloader() as reloader:
            result = _build(plan, staging, say, reloader, bundle_rel, tuple(parts), store_url,
                            helpers)
        with full_disk_named(bundle_rel):
            swap_in(staging, final)
    except DiskFull as full:
        shutil.rmtree(staging, ignore_errors=True)
        return _disk_full(final, bundle_rel, full.rel)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    say(f"bundle {'VERIFIED' if result.verified else 'NOT VERIFIED'}: {bundle_rel} "
        f"({report.human_bytes(result.bytes)})")
    write_fetch_file(plan, bundle_rel)
    return result


def write_fetch_file(plan: Plan, bundle_rel: str, stored_bundle=None) -> str | None:
    """`outputs/FETCH.txt`: the command that copies the bundle off the box, whole in a
    file (`cat` shows it however narrow the pane), beside the bundle, not in it (it is
    not part of what is kept, and the bundle's manifest stays the bundle's). The user,
    address and port come from the ssh session the engine was started in
    (`SSH_CONNECTION`), the folder from the home folder. Written again with the store's
    command once the bundle verified at the store (`stored_bundle`), the same one the
    ending shows. None when it cannot be written: the room and the notice still show
    the command."""
    from ..campaign.retrieval import Origin, fetch_command, fetch_file

    rel = fetch_file(bundle_rel)
    try:
        text = fetch_command(plan, bundle_rel, Origin.here(plan), stored_bundle) + "\n"
        target = plan.root / rel
        temp = target.with_name(f".{target.name}.{os.getpid()}")
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, target)
    except OSError:
        return None
    return rel


def _disk_full(final: Path, bundle_rel: str, rel: str) -> BundleResult:
    where = rel if rel == bundle_rel else f"{bundle_rel}/{rel}"
    problem = (f"no space left on device while writing {where}: the wrap-up stopped, "
               "removed its partial copy and kept any previous bundle; free some space "
               "and run `itera-tui wrapup` again")
    return BundleResult(final, bundle_rel, False, [{"path": bundle_rel, "problem": problem}],
                        0, error=f"no space left on device: {where}")


def _build(plan: Plan, staging: Path, say, reloader: Reloader, bundle_rel: str,
           parts: tuple, store_url: str | None, helpers: WrapupHelpers) -> BundleResult:
    planned, frozen_bytes = frozen_plan(plan, say)
    events = read_ledger(plan.state_dir / "ledger.jsonl")
    redactor, scrubber = LogRedactor(plan.root), Scrubber(plan.root)
    for rewriter in (redactor, scrubber):  # a [notify] token, wherever a text quotes it
        rewriter.hide(token_parts(plan.notify.urls) if plan.notify else ())
    stager = Stager(staging, scrubber, redactor)
    merged = merge_parts(parts, stager)  # the other boxes' runs, as if run here
    events = events + merged.events
    state = replay(events)
    runs_dir = RunDirectories(plan.state_dir / "runs", merged.run_dirs)
    if frozen_bytes is not None:
        stager.copy(plan.state_dir / "plan.toml", "plan.toml", "plan")
    stager.copy(plan.state_dir / "ledger.jsonl", "ledger.jsonl", "ledger")
    copied, cache = [], {}
    for i, run in enumerate(state.runs, 1):
        say(f"copying run {run.id} ({i}/{len(state.runs)})")
        part_stager = merged.stagers.get(run.id, stager)
        copied.append((run, copy_run(planned, run, runs_dir / run.id, part_stager, say, cache,
                                     reloader)))
    box_of = lambda r: {"box": merged.boxes.get(r.id, THIS_BOX)} if parts else {}  # noqa: E731
    entries = lambda bad: [run_entry(planned, r, runs_dir / r.id, f, bad) | box_of(r)  # noqa: E731
                           for r, f in copied]
    runs = entries({})
    merged.fold_into(stager)
    stops = [stop_entry(run) for run in state.runs if run.stop is not None]
    stager.write_text("stops.json", json.dumps(stops, indent=2) + "\n", "stops")
    conclusion = conclude(planned, state, runs_dir)
    drawing = plots.stage_figures(planned, state, runs_dir, conclusion, stager, helpers.draw)
    say(drawing.summary)
    code = keep_code(plan.root, _pickle_needs(staging, stager, reloader), stager,
                     exclude=_state_folders(plan),
                     entries=artifact_entries(staging, sdk_artifacts(stager)), git=helpers.git)
    stager.write_text("RELOAD.md", reloaddoc.render(
        staging, runs, code, plan.corpus.root if plan.corpus is not None else None), "reload")
    head = _manifest_head(planned, state, runs, frozen_bytes) | {
        "code": code, "figures": {"files": list(drawing.files), "problem": drawing.problem}}
    if parts:
        head["boxes"] = [p.to_dict() for p in parts]
    say(f"hashed {len(stager.entries)} files; verifying")
    _write_manifest(staging, head, stager)
    first = verify_bundle(staging, progress=say, reload_cache=cache, reloader=reloader)
    unverified = {rid: without_paths(text, redactor) for rid, text
                  in deliverable_failures(planned, state,
                                          first.failures + first.non_finite).items()}
    if unverified:  # what the report and the manifest say of a run depends on it
        head["runs"] = runs = entries(unverified)
        _write_manifest(staging, head, stager)
        conclusion = conclude(planned, state, runs_dir, unverified)
    context = dict(pva=actual.compare(planned, state, events),
                   budget=budget(planned, state, runs_dir, unverified),
                   conclusion=conclusion,
                   answer=verdict_of(planned, state, conclusion, runs_dir, unverified),
                   drawing=drawing, redactor=redactor, store_url=store_url,
                   boxes=boxes_section(planned, runs, parts) + report.moves_section(state))
    say("writing the report")
    result = again = first
    for _ in range(3):
        _write_report(staging, stager, head, planned, runs, context, result, bundle_rel)
        again = verify_bundle(staging, reload_cache=cache, reloader=reloader)
        if again.failures == result.failures:
            break
        result = again
    return BundleResult(plan.outputs_dir / "bundle", bundle_rel, again.verified,
                        again.failures, bundle_bytes(staging), unverified=unverified)


def _state_folders(plan: Plan) -> list[str]:
    out = []
    for folder in (plan.state_dir, plan.outputs_dir):
        try:
            out.append(folder.relative_to(plan.root).as_posix())
        except ValueError:
            pass
    return out


def _pickle_needs(staging: Path, stager: Stager, reloader: Reloader) -> dict[str, list[str]]:
    """bundle path -> the classes its pickles need, for weights files with no sidecar
    and checkpoint directories (read from the pickles; nothing is unpickled)."""
    targets = set()
    for rel, entry in stager.entries.items():
        if entry.unit:
            targets.add(entry.unit)
        elif entry.kind in ("artifact", "checkpoint") and rel + ".json" not in stager.entries \
                and rel.lower().endswith(TORCH_SUFFIXES):
            targets.add(rel)
    found = reloader.needs([staging / rel for rel in sorted(targets)])
    return {p.relative_to(staging).as_posix(): names for p, names in found.items()}


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
            "paths": Scrubber.note() | {"logs": LogRedactor.note()}}


def _write_manifest(staging: Path, head: dict, stager: Stager) -> None:
    body = dict(head, files=stager.listing(), omitted=stager.omitted)
    text = stager.scrubber.text(json.dumps(body, indent=2, default=str) + "\n")
    tmp = staging / (MANIFEST + ".tmp")
    with full_disk_named(MANIFEST):
        tmp.write_text(text)
        os.replace(tmp, staging / MANIFEST)


def _write_report(staging, stager, head, planned, runs, context, result, bundle_rel) -> None:
    files = len(stager.entries.keys() | {"report.md"}) + 1  # + the manifest
    redactor = context["redactor"]
    failures = tuple({"path": f["path"], "problem": without_paths(f["problem"], redactor)}
                     for f in result.failures)
    non_finite = tuple({"path": f["path"], "problem": without_paths(str(f["problem"]), redactor)}
                       for f in result.non_finite)
    verdict = report.Verdict(result.verified, failures, files, result.reloaded, non_finite)
    size = 0
    for _ in range(5):  # the report states the bundle size, which includes the report
        text = report.render(planned, runs, context["pva"], context["budget"],
                             context["conclusion"], verdict, answer=context["answer"],
                             drawing=context["drawing"], size_bytes=size, files=files,
                             bundle_rel=bundle_rel, plan_sha256=head["plan"]["sha256"],
                             tool_version=__version__,
                             clean=lambda t: without_paths(t, redactor), code=head.get("code"),
                             store_url=context.get("store_url"))
        text += context.get("boxes", "")
        stager.write_text("report.md", text, "report", scrubber=redactor)
        _write_manifest(staging, head, stager)
        now = bundle_bytes(staging)
        if now == size:
            break
        size = now
