"""Durations calibrated from an earlier campaign's bundle, beside the hand-written ones.

A first plan is written by hand; the next campaign can start from what the last
bundle measured (start-up, seconds per step, validation and checkpoint cost,
bundle size). This module is the pure part of that: the figures per calendar
task (hand-written and calibrated), how a plan uses them (`apply_calibration`),
and the `[calibration]` table a frozen plan keeps, so the campaign records
which durations it was planned with. Reading a bundle (verification, ledger,
metrics files) is `tui.bundle.prior`'s job: this layer imports neither the
bundle nor the engine. The measured figures themselves (`PilotMeasure`) and how
they scale to a full run (`estimate_full_run`) live here too: the engine
measures a run's files into a `PilotMeasure`, and both the engine's live
projection and planning from a prior scale it with the same arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Any

from .validate import Reader

USED = ("hand-written", "calibrated")
TASK_KINDS = ("run", "pilot", "step", "retrieval")
MIN_HOURS = 1e-6  # a calibrated interval is never zero: the calendar needs a duration


@dataclass(frozen=True)
class TaskCalibration:
    """One task's duration by hand next to what a prior campaign measured."""
    task: str  # calendar task: variant id, "pilot:<variant>", step id or "retrieval"
    kind: str  # run | pilot | step | retrieval
    hand_hours: float  # as planned by hand (a pilot's is derived from its variant)
    hours: float | None  # what the prior's measurements predict; None: nothing matched
    matched_by: str = ""  # "id" | "command+params" | "bundle size" | ""
    source: str = ""  # the prior run the figures come from (or the bundle)
    figures: tuple[tuple[str, float], ...] = ()  # startup_s, step_s, validation_s, ...
    note: str = ""

    @property
    def difference_hours(self) -> float | None:
        return None if self.hours is None else self.hours - self.hand_hours

    def to_dict(self) -> dict:
        diff = self.difference_hours
        return {"task": self.task, "kind": self.kind, "hand_hours": round(self.hand_hours, 6),
                "calibrated_hours": None if self.hours is None else round(self.hours, 6),
                "difference_hours": None if diff is None else round(diff, 6),
                "matched_by": self.matched_by or None, "source": self.source or None,
                "figures": {k: round(v, 6) for k, v in self.figures}, "note": self.note}


@dataclass(frozen=True)
class Calibration:
    """The durations a prior bundle predicts for this campaign, and which ones are used."""
    prior: str  # the bundle, relative to the campaign folder (never an absolute path)
    prior_campaign: str
    manifest_sha256: str
    corpus_sha256: str | None
    used: str  # "hand-written" | "calibrated": which durations the calendar uses
    tasks: tuple[TaskCalibration, ...]

    def task(self, task_id: str) -> TaskCalibration | None:
        return next((t for t in self.tasks if t.task == task_id), None)

    def using(self, used: str) -> "Calibration":
        return replace(self, used=used)

    def to_dict(self) -> dict:
        return {"prior": self.prior, "prior_campaign": self.prior_campaign,
                "manifest_sha256": self.manifest_sha256, "corpus_sha256": self.corpus_sha256,
                "used": self.used, "tasks": [t.to_dict() for t in self.tasks]}

    def to_table(self) -> dict:
        """The `[calibration]` table of a frozen plan (TOML has no null: absent keys)."""
        tasks = {}
        for t in self.tasks:
            row: dict[str, Any] = {"kind": t.kind, "hand_hours": t.hand_hours}
            if t.hours is not None:
                row["hours"] = t.hours
            for key in ("matched_by", "source", "note"):
                if getattr(t, key):
                    row[key] = getattr(t, key)
            if t.figures:
                row["figures"] = dict(t.figures)
            tasks[t.task] = row
        table = {"prior": self.prior, "prior_campaign": self.prior_campaign,
                 "manifest_sha256": self.manifest_sha256, "used": self.used, "tasks": tasks}
        if self.corpus_sha256:
            table["corpus_sha256"] = self.corpus_sha256
        return table


@dataclass(frozen=True)
class PilotMeasure:
    """What a pilot (or any run) measured, decomposed: start-up, all training steps,
    validation passes, checkpoint writes and the tail after its last record. The engine
    measures it from a run's files (`engine.estimate.measure_pilot`); planning scales it."""
    steps: int
    startup_s: float
    train_s: float  # all training steps, slow first ones included
    validations: int
    validation_s: float
    checkpoints: int
    checkpoint_s: float
    tail_s: float  # last record to exit: outputs, artifacts
    warm_step_s: float  # median of the later half's step gaps

    @property
    def step_s(self) -> float:
        return self.train_s / self.steps if self.steps else 0.0


def estimate_full_run(m: PilotMeasure, full_steps: int) -> tuple[float, float]:
    """(decomposed estimate, warm-step extrapolation) in seconds."""
    scale = full_steps / m.steps if m.steps else 1.0
    per_val = m.validation_s / m.validations if m.validations else 0.0
    per_ckpt = m.checkpoint_s / m.checkpoints if m.checkpoints else 0.0
    seconds = (m.startup_s + m.step_s * full_steps + per_val * m.validations * scale
               + per_ckpt * m.checkpoints * scale + m.tail_s)
    return seconds, m.warm_step_s * full_steps


def retrieval_hours(bundle_bytes: int, link_mbps: float) -> float:
    """Hours to copy a bundle of `bundle_bytes` over a `link_mbps` link."""
    return bundle_bytes * 8 / (link_mbps * 1e6) / 3600


def prior_keys(r: Reader) -> tuple[str | None, bool]:
    """`[campaign] prior` (an earlier campaign's bundle, relative to the campaign folder)
    and `calibrated` (plan with that bundle's measured durations), read by the loader."""
    prior = r.get_str("prior")
    if prior == "":
        r.problem("prior", "must not be empty (the folder of an earlier campaign's bundle)")
        prior = None
    elif prior is not None and PurePath(prior).is_absolute():
        r.problem("prior", "give the bundle relative to the campaign folder (the frozen plan "
                           "keeps it, and a bundle holds no absolute path of this machine)")
    calibrated = r.get_bool("calibrated", False)
    if calibrated and prior is None:
        r.problem("calibrated", "needs campaign.prior: the bundle the durations come from")
    return prior, bool(calibrated)


def apply_calibration(plan, calibration: Calibration):
    """The plan carrying `calibration`; with `used = "calibrated"` its calendar uses
    the calibrated durations (runs, pilots, steps, retrieval) where one was measured."""
    plan = replace(plan, calibration=calibration)
    if calibration.used != "calibrated":
        return plan
    hours = {t.task: max(t.hours, MIN_HOURS) for t in calibration.tasks if t.hours is not None}
    variants = tuple(replace(v, hours=hours.get(v.id, v.hours),
                             pilot_hours=hours.get(f"pilot:{v.id}", v.pilot_hours))
                     for v in plan.variants)
    steps = tuple(replace(s, hours=hours.get(s.id, s.hours)) for s in plan.steps)
    campaign = plan.campaign
    if "retrieval" in hours:
        campaign = replace(campaign, retrieval_hours=hours["retrieval"])
    return replace(plan, variants=variants, steps=steps, campaign=campaign)


def with_calibration_table(raw: dict, calibration: Calibration) -> dict:
    """A copy of a plan's raw TOML data holding the calibration (what gets frozen)."""
    return dict(raw) | {"calibration": calibration.to_table()}


def read_calibration(table, variants, steps, problems: list[str]) -> Calibration | None:
    """The `[calibration]` table itera-tui writes into a frozen plan, checked like any key."""
    if table is None:
        return None
    r = Reader(table, "calibration", problems)
    prior = r.get_str("prior", required=True) or ""
    campaign = r.get_str("prior_campaign", "") or ""
    manifest = r.get_str("manifest_sha256", "") or ""
    corpus = r.get_str("corpus_sha256")
    used = r.get_str("used", "hand-written", choices=USED) or "hand-written"
    rows = r.get_table("tasks") or {}
    r.reject_unknown(r.seen)
    known = {v.id: "run" for v in variants} | {f"pilot:{v.id}": "pilot" for v in variants}
    known |= {s.id: "step" for s in steps} | {"retrieval": "retrieval"}
    tasks = []
    for task_id, row in rows.items():
        tasks.append(_task(task_id, row, known, problems))
    return Calibration(prior, campaign, manifest, corpus, used,
                       tuple(t for t in tasks if t is not None))


def _task(task_id: str, row, known: dict, problems: list[str]) -> TaskCalibration | None:
    r = Reader(row, f'calibration.tasks."{task_id}"', problems)
    kind = r.get_str("kind", required=True, choices=TASK_KINDS)
    hand = r.get_number("hand_hours", required=True, non_negative=True)
    hours = r.get_number("hours", None, positive=True)
    matched = r.get_str("matched_by", "") or ""
    source = r.get_str("source", "") or ""
    note = r.get_str("note", "") or ""
    figures = r.get_table("figures") or {}
    r.reject_unknown(r.seen)
    if task_id not in known:
        r.problem("", "no variant, pilot or step of this plan has this id")
        return None
    if kind and kind != known[task_id]:
        r.problem("kind", f"expected {known[task_id]} for this task, got \"{kind}\"")
    clean = tuple((k, float(v)) for k, v in sorted(figures.items())
                  if isinstance(v, (int, float)) and not isinstance(v, bool))
    return TaskCalibration(task_id, known[task_id], hand or 0.0, hours, matched, source,
                           clean, note)


def corpus_sha256(corpus) -> str | None:
    """One digest of a plan's pinned corpus (every path and its sha256), None without one:
    two campaigns measured on the same corpus have the same digest."""
    if corpus is None:
        return None
    import hashlib

    lines = "".join(f"{rel}\0{digest}\n" for rel, digest in sorted(corpus.files))
    return hashlib.sha256(lines.encode()).hexdigest()
