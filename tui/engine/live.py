"""Live view of one run: its metrics feed, stop rules and bounded history.

The metrics file written by the run is the source of truth; after a restart
the engine reads it again from the start, so nothing is lost or counted twice.
Histories are downsampled in place (every other point dropped, stride doubled)
so a run of millions of records costs a few thousand points of memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .feed import JsonlFeed, StdoutFeed
from .rules import RuleSet

MAX_POINTS = 2048


class Downsampled:
    """Bounded (x, y) history that keeps an evenly thinned view of all points."""

    def __init__(self, max_points: int = MAX_POINTS):
        self.max_points = max_points
        self.points: list[tuple[float, float]] = []
        self.stride = 1
        self._seen = 0

    def add(self, x: float, y: float) -> None:
        if self._seen % self.stride == 0:
            self.points.append((x, y))
            if len(self.points) > self.max_points:
                self.points = self.points[::2]
                self.stride *= 2
        self._seen += 1


@dataclass(frozen=True)
class LiveView:
    """What the views show of a run, handed over as a frozen snapshot."""

    run_id: str
    records: int
    bad_lines: int
    last_step: int | None
    last_loss: float | None
    last_values: dict
    best_metric: float | None
    last_record_t: float | None
    first_record_t: float | None
    loss_history: tuple[tuple[float, float], ...]
    metric_history: tuple[tuple[float, float], ...]


class RunLive:
    def __init__(self, run_id: str, run_dir: Path, rules: RuleSet, patterns, metric: str,
                 direction: str, started_t: float):
        self.run_id = run_id
        self.run_dir = run_dir
        self.rules = rules
        self.jsonl = JsonlFeed(run_dir / "metrics.jsonl")
        self.stdout = StdoutFeed(run_dir / "stdout.log", patterns) if patterns else None
        self.metric = metric
        self.direction = direction
        self.started_t = started_t
        self.last_record_t: float | None = None
        self.first_record_t: float | None = None
        self.last_step: int | None = None
        self.last_values: dict = {}
        self.best: float | None = None
        self.loss = Downsampled()
        self.quality = Downsampled()
        self.events: list[dict] = []  # checkpoint acks, resume checks: consumed by engine
        self.popen = None
        self.control_seq = 0
        self.last_checkpoint_request_t = started_t
        self.exit_seen_t: float | None = None

    def poll(self, now: float, evaluate: bool = True):
        """Ingest new records; return the first Stop a rule raises, if any."""
        stop = None
        records = self.jsonl.poll()
        if self.stdout is not None:
            records += self.stdout.poll()
        for record in records:
            self._ingest(record, now)
            if evaluate and stop is None:
                stop = self.rules.on_record(record, now)
        return stop

    def _ingest(self, record: dict, now: float) -> None:
        t = record.get("t")
        if t.__class__ is not float and t.__class__ is not int:
            t = now
        self.last_record_t = t
        if self.first_record_t is None:
            self.first_record_t = t
        if "event" in record:
            self.events.append(record)
            return
        step = record.get("step")
        if step.__class__ is int or step.__class__ is float:
            self.last_step = int(step)
        x = self.last_step if self.last_step is not None else self.jsonl.records
        self.last_values.update(record)
        loss = record.get("loss")
        if loss.__class__ is float or loss.__class__ is int:
            self.loss.add(x, float(loss))
        value = record.get(self.metric)
        if (value.__class__ is float or value.__class__ is int) and math.isfinite(value):
            self.quality.add(x, float(value))
            if self.best is None or (value > self.best if self.direction == "max"
                                     else value < self.best):
                self.best = float(value)

    def take_events(self) -> list[dict]:
        events, self.events = self.events, []
        return events

    def view(self) -> LiveView:
        loss = self.last_values.get("loss")
        return LiveView(
            run_id=self.run_id,
            records=self.jsonl.records + (self.stdout.records if self.stdout else 0),
            bad_lines=self.jsonl.bad_lines + (self.stdout.bad_lines if self.stdout else 0),
            last_step=self.last_step,
            last_loss=float(loss) if isinstance(loss, (int, float)) else None,
            last_values={k: v for k, v in self.last_values.items()
                         if k not in ("t", "step", "source")}, best_metric=self.best,
            last_record_t=self.last_record_t, first_record_t=self.first_record_t,
            loss_history=tuple(self.loss.points), metric_history=tuple(self.quality.points))
