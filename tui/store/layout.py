"""Where each object of a campaign lives in its store, in one place.

    <url>/<part>/plan.toml                       the frozen plan (already redacted)
    <url>/<part>/ledger/<start>-<end>.jsonl      the ledger, as appended byte ranges
    <url>/<part>/checkpoints/<run>/<path>        each checkpoint once it verified
    <url>/<part>/logs/<run>/<stream>.log         a run's printed streams (their tail)
    <url>/<part>/results/<run>/<path>            what an exited run leaves that its
                                                 verdict and the bundle read: its
                                                 records, params, exit and the plan's
                                                 [deliverables], whole
    <url>/<part>/bundle/...                      the delivered bundle (manifest.json last)
    <url>/<part>/index.json                      what is stored whole: written after
                                                 every object, so a reader trusts only it

`<part>` is the first lot of the box's share: one store per campaign, each box of a
campaign over several writes under its own part and never another's. Byte offsets in
ledger names are zero-padded so a listing sorts in ledger order.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

INDEX = "index.json"
PLAN = "plan.toml"
LEDGER_DIR = "ledger"
CHECKPOINTS = "checkpoints"
LOGS = "logs"
RESULTS = "results"
BUNDLE = "bundle"
OFFSET_DIGITS = 14


class ObjectKind:
    """What a stored object is (the `kind` of an index entry and a store_object event)."""

    PLAN = "plan"
    LEDGER = "ledger"
    CHECKPOINT = "checkpoint"
    LOG = "log"
    RESULT = "result"  # a file an exited run leaves: records, params, deliverables
    BUNDLE = "bundle"


def part_of(plan, share=None) -> str:
    """This box's part of the store: the first lot of its share (or of the plan)."""
    if share is not None and getattr(share, "lots", None):
        return share.lots[0]
    return plan.lots[0].id if plan.lots else "campaign"


def safe_key(rel: str) -> str | None:
    """`rel` as a key below a part, or None when it would leave it."""
    rel = str(rel).replace("\\", "/")
    norm = posixpath.normpath(rel)
    if rel.startswith("/") or norm.startswith("..") or norm in (".", "") or "\x00" in rel:
        return None
    return norm


def inside_run(run: str, path: str) -> str | None:
    """`path` (a run's checkpoint, a deliverable) normalised inside the run's folder, or
    None when it would leave it: what the run names is never trusted as a key."""
    rel = safe_key(f"{run}/{path}")
    if rel is None or not rel.startswith(run + "/"):
        return None
    return rel[len(run) + 1:]


@dataclass(frozen=True)
class Layout:
    """The keys of one part, relative to the store's root."""

    part: str

    def key(self, *parts: str) -> str:
        return "/".join([self.part, *[p.strip("/") for p in parts if p]])

    @property
    def index(self) -> str:
        return self.key(INDEX)

    @property
    def plan(self) -> str:
        return self.key(PLAN)

    @property
    def ledger_dir(self) -> str:
        return self.key(LEDGER_DIR)

    def ledger_segment(self, start: int, end: int) -> str:
        return self.key(LEDGER_DIR, f"{start:0{OFFSET_DIGITS}d}-{end:0{OFFSET_DIGITS}d}.jsonl")

    def checkpoint(self, run: str, path: str) -> str:
        return self.key(CHECKPOINTS, run, path)

    def log(self, run: str, stream: str) -> str:
        return self.key(LOGS, run, f"{stream}.log")

    def result(self, run: str, path: str) -> str:
        return self.key(RESULTS, run, path)

    @property
    def bundle(self) -> str:
        return self.key(BUNDLE)


def parse_segment(name: str) -> tuple[int, int] | None:
    """(start, end) of a ledger segment's file name, or None for anything else."""
    base = posixpath.basename(name)
    if not base.endswith(".jsonl"):
        return None
    head = base[:-len(".jsonl")]
    start, _, end = head.partition("-")
    if not (start.isdigit() and end.isdigit()) or int(end) <= int(start):
        return None
    return int(start), int(end)
