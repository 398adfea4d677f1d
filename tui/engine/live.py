"""Live view of one run: its metrics feeds, stop rules and bounded history.

The files written by the run are the source of truth; after a restart the
engine reads them again from the start, so nothing is lost or counted twice.
Histories are downsampled in place (every other point dropped, stride doubled)
so a run of millions of records costs a few thousand points of memory.

Every record reaching this module has been type-checked by its feed; the
x axis of the charts is the run's global step (the printed step made
monotonic, see `printed.StepClock`), which is also what `global_step` in the
view reports for the pilot bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from .feed import RunFeeds
from .rules import RuleSet

MAX_POINTS = 2048
HIDDEN = ("t", "step", "source", "global_step", "step_total")  # not shown as metric values


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
    bad_lines: int  # lines and records that could not be used (counted, skipped)
    last_step: int | None  # the step as the run printed or logged it
    last_loss: float | None
    last_values: dict
    best_metric: float | None
    last_record_t: float | None
    first_record_t: float | None
    loss_history: tuple[tuple[float, float], ...]
    metric_history: tuple[tuple[float, float], ...]
    global_step: int | None = None  # monotonic: for the pilot bound and the charts
    problems: tuple[str, ...] = ()  # a feed that cannot work (e.g. tensorboard missing)


class RunLive:
    """`metrics` is the plan's `[metrics]` (a MetricsSpec; `(name, regex)` pairs work too)."""

    def __init__(self, run_id: str, run_dir: Path, rules: RuleSet, metrics, metric: str,
                 direction: str, started_t: float):
        self.run_id = run_id
        self.run_dir = run_dir
        self.rules = rules
        self.feeds = RunFeeds(run_dir, metrics, rules.watched | {metric})
        self.jsonl = self.feeds.jsonl
        self.metric = metric
        self.direction = direction
        self.started_t = started_t
        self.last_record_t: float | None = None
        self.first_record_t: float | None = None
        self.last_step: int | None = None
        self.global_step: int | None = None
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
        on_record = self.rules.on_record
        for _, records in self.feeds.poll():
            for record in records:
                self._ingest(record, now)
                if evaluate and stop is None:
                    stop = on_record(record, now)
        return stop

    def _ingest(self, record: dict, now: float) -> None:
        t = record.get("t")
        if t is None:
            t = now
        self.last_record_t = t
        if self.first_record_t is None:
            self.first_record_t = t
        if "event" in record:
            self.events.append(record)
            return
        step = record.get("step")
        if step is not None:
            self.last_step = step
        g = record.get("global_step", step)
        if g is not None and (self.global_step is None or g > self.global_step):
            self.global_step = g
        x = self.global_step if self.global_step is not None else self.feeds.records
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
            run_id=self.run_id, records=self.feeds.records, bad_lines=self.feeds.bad_lines,
            last_step=self.last_step,
            last_loss=float(loss) if loss.__class__ in (int, float) else None,
            last_values={k: v for k, v in self.last_values.items() if k not in HIDDEN},
            best_metric=self.best, last_record_t=self.last_record_t,
            first_record_t=self.first_record_t, loss_history=tuple(self.loss.points),
            metric_history=tuple(self.quality.points), global_step=self.global_step,
            problems=self.feeds.problems)
