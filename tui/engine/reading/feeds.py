"""Tail a run's metrics: the SDK's JSONL file, its printed streams, TensorBoard files.

A training process appends while we read. A line is parsed only once its
newline has arrived (a torn last line is waited for, never parsed half), a bad
line is counted and skipped, and a file that does not exist yet is simply
empty. Offsets are kept so each poll reads only what is new, a chunk at a
time, so memory stays bounded whatever a run writes.

Sources of one run, in the order they are read: `metrics.jsonl` (the SDK),
`stdout.log` and `stderr.log` through `[metrics]` (see `printed`), and the
event files `[metrics] tensorboard` names (see `tensorboard_feed`).
"""

from __future__ import annotations

from enum import IntEnum
from pathlib import Path

from ...campaign.plan import MetricsSpec
from ...campaign.presets import HF_TRAINER
from .printed import EpochSteps, PrintedFeed, StepClock
from .metric_records import parse_record
from .segments import SegmentTail

JSONL_CHUNK = 1 << 20  # bytes per read; also the longest JSONL line kept (longer: bad)
MAX_CHUNKS = 8  # chunks of one source per poll: bounds one poll's work (8 MiB of JSONL)
HF_PRESET = HF_TRAINER.name
BASE_NUMERIC = frozenset({"loss"})  # read as a number by the views whatever the plan says


class FeedKind(IntEnum):
    """A run's kinds of record source, in the order they are read and trusted: the first
    kind that has the decision metric gives the run's final figure (`ReadoutFold`). An
    int, so it keys a run's per-kind figures as cheaply as the hot loop needs."""
    JSONL = 0  # the SDK's metrics.jsonl: each record carries its own time
    PRINTED = 1  # stdout.log and stderr.log through [metrics]: dated by the file's mtime
    TENSORBOARD = 2  # the event files [metrics] tensorboard names: each event is dated


def as_spec(metrics) -> MetricsSpec:
    """A MetricsSpec from a spec, None, or `(name, regex)` pairs (the older form)."""
    if isinstance(metrics, MetricsSpec):
        return metrics
    return MetricsSpec.from_pairs(metrics or ())


class JsonlFeed:
    """Metrics records from the SDK's JSONL file, each one type-checked (`metric_records`)."""

    def __init__(self, path: Path, numeric: frozenset = BASE_NUMERIC):
        self.tail = SegmentTail(path, printed=False, max_segment=JSONL_CHUNK,
                                chunk=JSONL_CHUNK)
        self.numeric = frozenset(numeric)
        self._bad = 0
        self.records = 0

    @property
    def bad_lines(self) -> int:
        return self._bad + self.tail.dropped

    @property
    def more(self) -> bool:
        return self.tail.more

    def poll(self) -> list[dict]:
        """Records of the next chunk of the file (call again while `more`)."""
        out = []
        append = out.append
        numeric = self.numeric
        for raw in self.tail.read():
            record = parse_record(raw, numeric)
            if record is None:
                if raw.strip():
                    self._bad += 1
                continue
            append(record)
        self.records += len(out)
        return out


def StdoutFeed(path: Path, patterns) -> PrintedFeed:  # noqa: N802 (the older class name)
    """The printed feed of one stdout file (tests and tools that read a single file)."""
    return PrintedFeed(path, "stdout", as_spec(patterns))


class RunFeeds:
    """Every metrics source of one run directory, read in a fixed order."""

    def __init__(self, run_dir: Path, metrics, numeric: frozenset = frozenset()):
        spec = as_spec(metrics)
        run_dir = Path(run_dir)
        self.jsonl = JsonlFeed(run_dir / "metrics.jsonl",
                               BASE_NUMERIC | spec.names | frozenset(numeric))
        self.clock = StepClock()  # shared: a step printed on stderr dates stdout's records
        # HF's dicts: their step from their epoch (the Trainer's state, or its bar's redraws)
        self.epochs = EpochSteps(run_dir) if spec.preset == HF_PRESET and spec.pairs else None
        self.printed = [PrintedFeed(run_dir / f"{stream}.log", stream, spec, self.clock,
                                    self.epochs)
                        for stream in ("stdout", "stderr")] if spec.printed else []
        self.tensorboard = None
        if spec.tensorboard:
            from .tensorboard import TensorBoardFeed

            self.tensorboard = TensorBoardFeed(run_dir, spec.tensorboard, spec.tags)

    @property
    def sources(self) -> list:
        return [self.jsonl, *self.printed] + ([self.tensorboard] if self.tensorboard else [])

    @property
    def kinds(self) -> list[FeedKind]:
        """The kind of each source, by the index `sources` and `poll` give it."""
        return [FeedKind.JSONL] + [FeedKind.PRINTED] * len(self.printed) + \
            ([FeedKind.TENSORBOARD] if self.tensorboard else [])

    def of_kind(self, kind: FeedKind) -> list:
        """The sources of one kind, in the order `sources` reads them."""
        return [feed for feed, its in zip(self.sources, self.kinds) if its == kind]

    def poll(self):
        """(source index, records) batches of what is new, a bounded amount per source."""
        printed = len(self.printed)
        for index, feed in enumerate(self.sources):
            if index == 1 and printed:
                yield from self.printed_round(1)
                continue
            if 1 < index <= printed:
                continue  # read in the round above
            for _ in range(MAX_CHUNKS):
                batch = feed.poll()
                if batch:
                    yield index, batch
                if not feed.more:
                    break

    def printed_round(self, base: int):
        """(index, batch) of one bounded read of each printed stream, `base` the first's
        index. With HF dicts to date (`EpochSteps`) the batches are held until both
        streams are read, then dated (`settle`): the bar redrawn after a dict is
        written after it, on the other stream."""
        held = []
        for offset, feed in enumerate(self.printed):
            for _ in range(MAX_CHUNKS):
                batch = feed.poll()
                if batch:
                    if self.epochs is not None:
                        held.append((base + offset, batch))
                    else:
                        yield base + offset, batch
                if not feed.more:
                    break
        for feed in self.printed:
            if feed.undated:
                feed.settle()
        yield from held

    def shed_backlog_past(self, limit: int) -> None:
        """Live reading: a source more than `limit` bytes behind jumps to its newest
        64 KiB, the bytes between counted in `skipped` (see `segments`)."""
        for tail in self._tails():
            tail.shed_after = limit

    def _tails(self) -> list:
        return [f.tail for f in (self.jsonl, *self.printed)]

    @property
    def backlog(self) -> int:
        """Bytes the run has written that are not read yet (as of the last poll)."""
        return sum(t.backlog for t in self._tails())

    @property
    def skipped(self) -> int:
        """Bytes of output jumped over to keep up (never read, never ruled on)."""
        return sum(t.skipped for t in self._tails())

    @property
    def records(self) -> int:
        return sum(f.records for f in self.sources)

    @property
    def bad_lines(self) -> int:
        return sum(f.bad_lines for f in self.sources)

    @property
    def problems(self) -> tuple[str, ...]:
        refused = tuple(t.refused for t in self._tails() if t.refused)
        refused += tuple(f"{t.path.name} was truncated or replaced: read again from its start"
                         for t in self._tails() if t.rewound)
        return refused + (tuple(self.tensorboard.problems) if self.tensorboard else ())

    def pending(self) -> bool:
        return any(f.more for f in self.sources)

    def look_again(self) -> None:
        """Before the last read of a run that exited: sources found by looking (event
        files) are looked for again, not at their usual period."""
        if self.tensorboard is not None:
            self.tensorboard.look_again()


class RecordStream:
    """The records of one kind of source of a run, read lazily from its files.

    Iterating reads the files from the start again, a chunk at a time (the
    live engine's feeds, the same order), so memory stays bounded whatever a
    run wrote: a 60 s flood is hundreds of MB of records that a list would
    hold as GBs of dicts. Iterate it; `list()` it only when it is known small."""

    def __init__(self, run_dir: Path, metrics, numeric: frozenset, kind: FeedKind):
        self.run_dir, self.metrics, self.numeric, self.kind = run_dir, metrics, numeric, kind

    def __iter__(self):
        feeds = RunFeeds(self.run_dir, self.metrics, self.numeric)
        sources = feeds.of_kind(self.kind)  # printed: one shared step clock, the live order
        while sources:
            if self.kind == FeedKind.PRINTED:
                for _, batch in feeds.printed_round(1):
                    yield from batch
            else:
                for feed in sources:
                    for _ in range(MAX_CHUNKS):
                        yield from feed.poll()
                        if not feed.more:
                            break
            if not any(f.more for f in sources):
                return


def recorded_sources(run_dir: Path, metrics, numeric: frozenset = frozenset()
                     ) -> list[RecordStream]:
    """All records a run has written, per source: [SDK JSONL, printed, TensorBoard],
    each a `RecordStream` (iterate it: read lazily, bounded memory).

    For reading a run after the fact (estimates, conclusion, the bundle's
    curves); the live engine tails the same files incrementally instead, and
    this reads them the same way (same chunks, same step clock), so both
    see the same records.
    """
    spec = as_spec(metrics)
    return [RecordStream(Path(run_dir), spec, frozenset(numeric), kind) for kind in FeedKind]
