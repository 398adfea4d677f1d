"""Load `campaign.toml` into a frozen Plan, reporting every problem at once.

Each section is read through a `Reader` that knows its key path, so messages
name the exact key (`variant[2].category: ...`). Cross-references (`after`
ids, cycles, GPUs per lot, the control variant, corpus files) are checked
after the sections, and only a clean plan is returned.
"""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

from ..calibration import apply_calibration, prior_keys, read_calibration
from ..files import links_out_of_campaign, sha256_file
from ..graph import find_cycle, steps_after_variants
from .lots import assign_devices, read_lot
from .metrics import read_metrics, with_watch_defaults
from .sections import (read_checkpoint, read_deliverables, read_pilot, read_step,
                            read_stop, read_store, read_variant)
from ..notify_plan import read_notify
from ..plan import Campaign, Corpus, Expense, Plan, Window
from ..pricing import catalog_price
from ..retry import read_retry
from ..units import default_reserve_hours
from ..validate import PlanError, Reader, describe, did_you_mean

SECTIONS = ("campaign", "window", "lot", "expense", "corpus", "step", "variant", "pilot",
            "stop", "metrics", "checkpoint", "deliverables", "engine", "notify",
            "store", "retry",
            "calibration")  # calibration: written by itera-tui into the frozen plan
ARRAY_SECTIONS = ("lot", "expense", "step", "variant", "stop")


def load_plan(path: str | Path, check_files: bool = True) -> Plan:
    """Read and validate a campaign file; raise PlanError with every problem."""
    path = Path(path)
    name = path.name
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise PlanError([f"{name}: no such file ({path}); run itera-tui in the folder that "
                         "holds your campaign.toml, or give its path; none yet? `itera-tui init` "
                         "writes one to start from (`itera-tui init --demo` the demo)"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PlanError([f"{name}: cannot read: {exc}"]) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError([f"{name}: not valid TOML: {exc}"]) from None
    return plan_from_dict(raw, path.resolve(), check_files=check_files)


def plan_from_dict(raw: dict, path: Path, check_files: bool = True) -> Plan:
    problems: list[str] = []
    top = Reader(raw, "", problems)
    top.reject_unknown(SECTIONS)
    for name in ARRAY_SECTIONS:
        if name in raw and not isinstance(raw[name], list):
            problems.append(f"{name}: expected an array of tables ([[{name}]]), got "
                            f"{describe(raw[name])}")
    lots = assign_devices(tuple(read_lot(t, i, problems)
                                for i, t in enumerate(_array(raw, "lot"))), problems)
    if not lots:
        problems.append("lot: at least one [[lot]] is required (gpu, days or hours, price)")
    expenses = tuple(_expense(t, i, problems) for i, t in enumerate(_array(raw, "expense")))
    steps = tuple(read_step(t, i, problems) for i, t in enumerate(_array(raw, "step")))
    retry = read_retry(raw.get("retry"), "retry", problems)
    variants = tuple(read_variant(t, i, problems, retry)
                     for i, t in enumerate(_array(raw, "variant")))
    if not variants:
        problems.append("variant: at least one [[variant]] is required (the control)")
    campaign = _campaign(raw.get("campaign", {}), variants, problems,
                         max((lot.hours for lot in lots), default=0.0))
    window = _window(raw.get("window", {}), problems)
    corpus = _corpus(raw.get("corpus"), path.parent, check_files, problems)
    pilot = read_pilot(raw.get("pilot"), problems)
    stops = tuple(read_stop(t, i, problems) for i, t in enumerate(_array(raw, "stop")))
    metrics = read_metrics(raw.get("metrics", {}), problems)
    stops = with_watch_defaults(stops, metrics)
    checkpoint = read_checkpoint(raw.get("checkpoint", {}), problems)
    deliverables = read_deliverables(raw.get("deliverables", {}), problems)
    engine = Reader(raw.get("engine", {}), "engine", problems)
    grace = engine.get_number("grace_seconds", 30.0, positive=True) or 30.0
    shutdown_grace = engine.get_number("shutdown_grace_seconds", 60.0, positive=True) or 60.0
    preemption = _preemption(engine)
    engine.reject_unknown(engine.seen)
    _check_references(lots, steps, variants, stops, campaign, problems)
    calibration = read_calibration(raw.get("calibration"), variants, steps, problems)
    notify = read_notify(raw.get("notify"), path.parent, problems)
    store = read_store(raw.get("store"), problems)
    problems += links_out_of_campaign(path.parent, campaign.outputs)
    if problems:
        raise PlanError(problems)
    plan = Plan(path=path, campaign=campaign, window=window, lots=lots, expenses=expenses,
                corpus=corpus, steps=steps, variants=variants, pilot=pilot, stops=stops,
                metrics=metrics, checkpoint=checkpoint, deliverables=deliverables,
                grace_seconds=grace, shutdown_grace_seconds=shutdown_grace,
                preemption=preemption, raw=raw,
                notify=notify, store=store, retry=retry)
    return apply_calibration(plan, calibration) if calibration else plan


# the providers whose notice tui.service.preemption reads
PREEMPTION_SOURCES = ("aws", "gcp", "azure")
# AWS warns 2 min ahead, GCP and Azure 30 s: a poll every 5 s leaves most of any (`check`
# says it)
PREEMPTION_POLL_S = 5.0


def preemption_source(source: str) -> str:
    """Where `[engine] preemption` reads its notice, in words: the provider, or a URL."""
    return source if source in PREEMPTION_SOURCES else "the host's URL"


def _preemption(engine) -> str | None:
    """`[engine] preemption`: "aws", "gcp", "azure", "none", or an http(s) URL of the
    host's own."""
    value = engine.get_str("preemption", "none")
    if value is None or value == "none":
        return None
    if value in PREEMPTION_SOURCES or value.startswith(("http://", "https://")):
        return value
    engine.problem("preemption", f"expected {'|'.join(PREEMPTION_SOURCES)}|none or an "
                   f"http(s):// URL that answers once the box is to go, got {value!r}")
    return None


def _array(raw: dict, name: str) -> list:
    value = raw.get(name, [])
    return value if isinstance(value, list) else []


def _campaign(table, variants, problems, window_hours: float = 0.0) -> Campaign:
    r = Reader(table, "campaign", problems)
    name = r.get_str("name", required=True) or "campaign"
    question = r.get_str("question", required=True) or ""
    metric = r.get_str("metric", "val_acc")
    direction = r.get_str("direction", "max", choices=("max", "min"))
    min_gain = r.get_number("min_gain", 0.0, non_negative=True)
    threshold = r.get_number("threshold", None)
    default_control = next((v.id for v in variants if v.category == "mandatory"), "")
    control = r.get_str("control", default_control) or default_control
    outputs = r.get_str("outputs", "outputs")
    reserve = default_reserve_hours(window_hours)
    wrapup = r.get_number("wrapup_hours", reserve, non_negative=True)
    retrieval = r.get_number("retrieval_hours", reserve, non_negative=True)
    mbps = r.get_number("link_mbps", 100.0, positive=True)
    prior, calibrated = prior_keys(r)
    r.reject_unknown(r.seen)
    if outputs and (Path(outputs).is_absolute() or ".." in Path(outputs).parts):
        r.problem("outputs", "must be a directory inside the campaign folder")
    return Campaign(name=name, question=question, metric=metric or "val_acc",
                    direction=direction or "max", min_gain=min_gain or 0.0,
                    threshold=threshold, control=control, outputs=outputs or "outputs",
                    wrapup_hours=reserve if wrapup is None else wrapup,
                    retrieval_hours=reserve if retrieval is None else retrieval,
                    link_mbps=mbps or 100.0, prior=prior, calibrated=calibrated)


def _window(table, problems) -> Window:
    r = Reader(table, "window", problems)
    start = r.get_datetime("start")
    r.reject_unknown(r.seen)
    if start is not None and start.tzinfo is None:
        r.problem("start", "give a time zone (e.g. 2026-12-01T09:00:00Z) so the countdown "
                           "is unambiguous")
    return Window(start=start)


def _check_phases(steps, variants, problems) -> None:
    """A variant cannot wait for a step that itself runs after the variants."""
    post = steps_after_variants(steps, {v.id for v in variants})
    for i, v in enumerate(variants):
        for dep in v.after:
            if dep in post:
                problems.append(f"variant[{i}].after: \"{dep}\" runs after the variants (it "
                                "waits for one, or is a wrap-up step): that would be a cycle")


def _expense(table, i, problems) -> Expense:
    r = Reader(table, f"expense[{i}]", problems)
    name = r.get_str("name", required=True) or f"expense{i + 1}"
    usd = r.get_number("usd", required=True, non_negative=True) or 0.0
    r.reject_unknown(r.seen)
    return Expense(name=name, usd=usd)


def _corpus(table, root: Path, check_files, problems) -> Corpus | None:
    if table is None:
        return None
    r = Reader(table, "corpus", problems)
    base = r.get_str("root", ".") or "."
    files = r.get_table("files") or {}
    max_len = r.get_int("max_len", None, minimum=1)
    read_only = bool(r.get_bool("read_only", False))
    r.reject_unknown(r.seen)
    if not read_only and not _inside(root, root / base):
        r.problem("root", f"{describe(base)} leaves the campaign folder; a corpus kept "
                  "elsewhere (a shared /data mount) must be declared `read_only = true`, "
                  "so nothing of the campaign ever writes there")
    pinned = []
    for rel, digest in files.items():
        key = f'files."{rel}"'
        if not isinstance(digest, str) or len(digest) != 64:
            r.problem(key, f"expected a pinned sha256 (64 hex digits), got {describe(digest)}")
            continue
        pinned.append((rel, digest.lower()))
        if not _inside(root / base, root / base / rel):
            r.problem(key, f"{describe(rel)} leaves the corpus root")
            continue
        if check_files:
            target = root / base / rel
            if target.is_symlink() and not target.exists():
                r.problem(key, f"corpus file {Path(base) / rel} is a symbolic link that leads "
                          "nowhere (a loop, or a missing target)")
            elif not target.is_file():
                r.problem(key, f"corpus file not found: {Path(base) / rel}")
            elif sha256_file(target)[0] != digest.lower():
                r.problem(key, f"sha256 mismatch for {Path(base) / rel}: the corpus changed")
    return Corpus(root=base, files=tuple(pinned), max_len=max_len, read_only=read_only)


def _inside(folder: Path, path: Path) -> bool:
    """Is `path` (after `..` and links) inside `folder`?"""
    inner, outer = os.path.realpath(path), os.path.realpath(folder)  # never raises on a loop
    return inner == outer or inner.startswith(outer.rstrip(os.sep) + os.sep)


RESERVED_IDS = ("decision", "wrapup", "retrieval")  # the calendar's own intervals
ID_SHAPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")  # ids name run folders


def _check_id(kind: str, i: int, value: str, problems: list[str]) -> None:
    if not ID_SHAPE.fullmatch(value) or ".." in value:
        problems.append(f"{kind}[{i}].id: \"{value}\" names folders on disk: use letters, "
                        "digits, '_', '-' and '.' (64 at most, no '..', starting with a "
                        "letter or digit)")


def _check_references(lots, steps, variants, stops, campaign, problems) -> None:
    ids: dict[str, str] = {}
    for i, lot in enumerate(lots):
        _check_id("lot", i, lot.id, problems)
    for kind, items in (("step", steps), ("variant", variants)):
        for i, item in enumerate(items):
            _check_id(kind, i, item.id, problems)
            if item.id in RESERVED_IDS or item.id.startswith("pilot:"):
                problems.append(f"{kind}[{i}].id: \"{item.id}\" is reserved for the "
                                "calendar's own intervals; choose another id")
            if item.id in ids:
                problems.append(f"{kind}[{i}].id: duplicate id \"{item.id}\" "
                                f"(already a {ids[item.id]})")
            ids[item.id] = kind
    for kind, items in (("step", steps), ("variant", variants)):
        for i, item in enumerate(items):
            for dep in item.after:
                if dep not in ids:
                    problems.append(f"{kind}[{i}].after: unknown id \"{dep}\""
                                    f"{did_you_mean(dep, ids)}")
    graph = {item.id: [d for d in item.after if d in ids] for item in (*steps, *variants)}
    cycle = find_cycle(graph)
    if cycle:
        problems.append("after: dependency cycle " + " -> ".join(cycle))
    else:
        _check_phases(steps, variants, problems)
    max_gpus = max((lot.gpus for lot in lots), default=0)
    for kind, items in (("step", steps), ("variant", variants)):
        for i, item in enumerate(items):
            if lots and item.gpus > max_gpus:
                problems.append(f"{kind}[{i}].gpus: needs {item.gpus} GPUs but the largest "
                                f"lot has {max_gpus}; a run cannot span two lots (their "
                                "memories do not merge)")
    lot_ids = [lot.id for lot in lots]
    if len(set(lot_ids)) != len(lot_ids):
        problems.append("lot.id: lot ids must be unique")
    variant_ids = {v.id for v in variants}
    if variants and campaign.control not in variant_ids:
        problems.append(f"campaign.control: no variant \"{campaign.control}\""
                        f"{did_you_mean(campaign.control, variant_ids)}")
    elif variants and campaign.control and \
            next(v for v in variants if v.id == campaign.control).category != "mandatory":
        problems.append("campaign.control: the control must be a mandatory variant")
    for i, stop in enumerate(stops):
        for vid in stop.variants:
            if vid not in variant_ids and vid not in ids:
                problems.append(f"stop[{i}].variants: unknown id \"{vid}\""
                                f"{did_you_mean(vid, ids)}")
