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

import os
from collections import deque
from pathlib import Path

from ..conclusion.delivered import BEST_MODEL_EVENT
from ..conclusion.outcome import STEP_VALUES, ReadoutFold
from ..reading.feeds import FeedKind, RunFeeds
from ..views import LiveView  # noqa: F401  (its home is views.py; re-exported)
from ..rules import RuleSet, first_non_finite, where

MAX_POINTS = 2048
# bytes a live source may lag behind before its backlog is skipped: far above what a
# training script writes in one poll (1 MB/s at 4 polls a second), far below what one poll
# can read, so a flood costs the engine a few hundred KiB a poll and the rules stay on time
SHED_AFTER = 256 << 10
HIDDEN = ("t", "step", "source", "global_step", "step_total", "record")  # not shown as metric values


class Downsampled:
    """Bounded (x, y) history that keeps an evenly thinned view of all points."""

    def __init__(self, max_points: int = MAX_POINTS):
        self.max_points = max_points
        self.points: list[tuple[float, float]] = []  # y as a float whatever it came as
        self.stride = 1
        self._seen = 0

    def extend(self, pairs: list) -> None:
        """(x, y) pairs in order, a batch at a time. Kept: every `stride`-th pair counted
        over the history's life; when that makes one more than `max_points`, every other
        point kept goes and the stride doubles. Done by slices up to the pair that fills
        the history, so a tqdm bar's record per update costs the ingest loop a list
        append, not a call (tests/test_live_histories.py holds it to one pair at a time)."""
        start, end = 0, len(pairs)
        while start < end:
            first = start + (-self._seen) % self.stride  # the next pair kept
            room = self.max_points + 1 - len(self.points)  # kept until the next halving
            stop = min(end, first + (room - 1) * self.stride + 1)
            self.points.extend([(x, float(y)) for x, y in pairs[first:stop:self.stride]])
            self._seen += stop - start
            start = stop
            if len(self.points) > self.max_points:
                self.points = self.points[::2]
                self.stride *= 2


class StepTimes:
    """When the run reached each global step, as far as its records tell: the time a
    record carries (the SDK's `t`), else when its batch was written (the stream's mtime,
    never later than the line; one change per printed batch, its newest step). Bounded:
    the newest `MAX_POINTS` step changes, enough to date a checkpoint written a while
    ago. `at(t)`: the step of the last record written at or before `t` (a checkpoint's
    mtime), None when none is known."""

    def __init__(self, max_points: int = MAX_POINTS):
        self._points: deque[tuple[float, int]] = deque(maxlen=max_points)

    @property
    def last(self) -> int | None:
        return self._points[-1][1] if self._points else None

    def extend(self, changes: list[tuple[float, int]]) -> None:
        """(t, step) changes collected by the caller, in order, each a step other than the
        one before it, the first other than `last` (the ingest loop keeps them in a list:
        one call a batch, not one a record)."""
        self._points.extend(changes)

    def at(self, t: float) -> int | None:
        for when, step in reversed(self._points):
            if when <= t:
                return step
        return None


class RunLive:
    """`metrics` is the plan's `[metrics]` (a MetricsSpec; `(name, regex)` pairs work too)."""

    def __init__(self, run_id: str, run_dir: Path, rules: RuleSet, metrics, metric: str,
                 direction: str, started_t: float, started_mono: float | None = None,
                 bound: int | None = None, watched: tuple[str, ...] | None = None):
        self.run_id = run_id
        self.run_dir = run_dir
        self.rules = rules
        # `watched`: what the run's readout checks for non-finite numbers (the plan's
        # `non_finite` metrics for it); None: what its rules watch
        watched = tuple(sorted(rules.watched)) if watched is None else tuple(watched)
        self.feeds = RunFeeds(run_dir, metrics, rules.watched | {metric} | set(watched))
        self.fold = ReadoutFold(metric, watched, bound)  # what `status` judges it by, once ended
        # the rules test every name the readout watches for non-finite values: a batch they
        # passed whole holds none, and the readout need not test its records again
        self._rules_cover_fold = set(watched) <= rules.finite_watched
        self._kinds = self.feeds.kinds  # by source index, as feeds.poll gives them
        self.feeds.shed_backlog_past(SHED_AFTER)  # rules on the newest records, always
        self.jsonl = self.feeds.jsonl
        self.metric = metric
        self.direction = direction
        self.started_t = started_t  # wall: what a person reads
        # monotonic twins, for liveness (see tui.engine.clock): when the run started, when
        # its first and its last record arrived (a backlog read after a restart is dated
        # from its age on the wall clock, once)
        self.started_mono = started_t if started_mono is None else started_mono
        self.first_record_mono: float | None = None
        self.last_record_mono: float | None = None
        self._backlog = True  # the first poll reads what was written before we watched
        self.last_record_t: float | None = None
        self.first_record_t: float | None = None
        self.last_step: int | None = None
        self.global_step: int | None = None
        self.first_step: int | None = None  # the global step of its first record with one
        # the `epoch` of its first record, when that record had no step (HF's dicts before
        # its first save, with disable_tqdm): dated once the steps per epoch are known
        self._first_epoch: float | None = None
        self.step_times = StepTimes()  # dates a watched checkpoint by its mtime
        self.last_values: dict = {}
        self.best: float | None = None
        self.final: float | None = None
        self.loss = Downsampled()
        self.quality = Downsampled()
        self.events: list[dict] = []  # checkpoint acks, resume checks: consumed by engine
        self._seen = 0  # metric records ingested: the x axis before any step is known
        self.bound = bound  # a pilot's step bound (or the step its rule fired at): its
        # figures stop there
        self.past_bound = 0

    def poll(self, now: float, evaluate: bool = True, mono: float | None = None):
        """Ingest new records; return the first Stop a rule raises, if any. `now` is the
        wall clock, `mono` the monotonic one (default: `now`, for a caller with one clock)."""
        stop = None
        mono = now if mono is None else mono
        for index, records in self.feeds.poll():
            written = self._written_t(index, now)
            found = self._ingest(records, written, evaluate and stop is None, self._kinds[index])
            stop = stop or found
            arrived = mono - max(0.0, now - written) if self._backlog else mono
            if self.first_record_mono is None:
                self.first_record_mono = arrived
            self.last_record_mono = arrived
        self._backlog = False
        return stop

    def _written_t(self, index: int, now: float) -> float:
        """When a batch's bytes were written, for records that carry no time (printed
        lines): the file's mtime, not when we read it. After a restart the backlog of
        a print-only script must not reset the `stall` timer to 'just now'."""
        tail = getattr(self.feeds.sources[index], "tail", None)
        try:
            return min(now, os.stat(tail.path).st_mtime) if tail is not None else now
        except OSError:
            return now

    def _ingest(self, records: list[dict], now: float, evaluate: bool,
                kind: FeedKind = FeedKind.JSONL):
        """Fold a batch of records into the view and into the run's readout (`fold`,
        `ReadoutFold`: the same fold as its `add`, done in this loop so a batch is walked
        once, not twice); the first Stop a rule raises, if any. One loop with its state in
        locals: a tqdm bar is a record per update."""
        if not records:
            return None
        if self.first_record_t is None:
            self.first_record_t = records[0].get("t", now)
        self.last_record_t = records[-1].get("t", now)  # printed records carry no time
        stop = self.rules.first_stop(records, now) if evaluate else None
        if stop is not None and stop.step is not None and self.bound is not None:
            # a pilot's figures end where its rule fired too: what it printed in its grace
            # after that is not its figure (the decision point, the report, the bundle)
            self.bound = min(self.bound, stop.step)
            self.fold.bound = self.bound
        metric, maximize = self.metric, self.direction == "max"
        losses, qualities, changes = [], [], []  # added to the histories once, after the loop
        add_loss, add_quality, dated = losses.append, qualities.append, changes.append
        update, events = self.last_values.update, self.events
        best, final = self.best, self.final
        gstep, last_step, seen = self.global_step, self.last_step, self._seen
        bound = self.bound
        fold = self.fold  # every number a feed hands over fits a float: is_number is a class test
        watched, cause, at = fold.watched, fold.cause, fold.at
        unsure = cause is None and not (evaluate and stop is None and self._rules_cover_fold)
        last, folded = fold.values(kind)
        last_dated = self.step_times.last
        # a printed batch has no time of its own: all of it is dated when it was written, so
        # only its newest step is a change worth keeping (dated record by record, a tqdm bar
        # read after a while pushed every older step out of the bounded history)
        timed = kind != FeedKind.PRINTED
        first = self.first_step  # the global step of its first record with one
        for record in records:
            get = record.get
            step = get("step")
            g = get("global_step", step)
            past = bound is not None and (g.__class__ is int or g.__class__ is float) and g > bound
            if "event" in record:
                events.append(record)
                if past:
                    continue
                if get("event") == BEST_MODEL_EVENT:
                    fold.deliver(record)
                    continue
                value = get(metric)  # an event may carry the metric: the readout counts it
                if value.__class__ is float or value.__class__ is int:
                    last = value
                    if value - value == 0:
                        folded = float(value)
                continue
            if g != last_dated and g.__class__ is int:
                if timed:
                    dated((get("t", now), g))
                last_dated = g
                if first is None:
                    first = self._first_of(g)
            elif first is None and g is None and self._first_epoch is None:
                epoch = get("epoch")
                if epoch.__class__ is float:
                    self._first_epoch = epoch
            if past:
                self.past_bound += 1  # the rules below still see it; the figures do not
                if gstep is None or g > gstep:
                    gstep = g
                continue
            seen += 1
            if step is not None:
                last_step = step
            if g is not None and (gstep is None or g > gstep):
                gstep = g
            update(record)
            loss = get("loss")
            if loss.__class__ is float or loss.__class__ is int:
                add_loss((seen if gstep is None else gstep, loss))
            if unsure:
                name = first_non_finite(record, watched)  # the rules' own test
                if name is not None:
                    cause = f"{name} was {record[name]} {where(record)}"
                    unsure = False
            value = get(metric)
            if value.__class__ is float or value.__class__ is int:
                last = value
                if value - value == 0:
                    add_quality((seen if gstep is None else gstep, value))
                    final = folded = float(value)
                    if best is None or (value > best if maximize else value < best):
                        best = float(value)
                    if g.__class__ is int and (len(at) < STEP_VALUES or (kind, g) in at):
                        at[(kind, g)] = folded
        self.loss.extend(losses)
        self.quality.extend(qualities)
        if not timed and last_dated is not None and last_dated != self.step_times.last:
            changes.append((now, last_dated))
        self.step_times.extend(changes)
        self.best, self.final = best, final
        self.global_step, self.last_step, self._seen = gstep, last_step, seen
        self.first_step = first
        fold.keep(kind, cause, last, folded)
        return stop

    def _first_of(self, g: int) -> int:
        """The step its records began at, `g` being the first step read: an HF run with
        `disable_tqdm` prints its dicts undated until its first save gives the steps per
        epoch, so its first dict (at step 181 of a run resumed from checkpoint-180) is
        dated by its own epoch then, not taken from the first dict after that save."""
        epochs = self.feeds.epochs
        if self._first_epoch is None or epochs is None:
            return g
        step = epochs.step_at(self._first_epoch)
        return step if step is not None and step <= g else g

    def readout_fields(self) -> dict:
        """The readout for `run_exited`: what the engine folded of every record it read,
        once it has read to the end of every source (else {}: its files are read again
        when it is judged, since its newest records, the final value among them, are
        not folded yet). `read_whole` says whether that was all the run wrote; when
        output was skipped to keep up (a flood), `unread_bytes` says how much the
        readout, like the stop rules, never saw."""
        tails = [self.feeds.jsonl.tail, *(f.tail for f in self.feeds.printed)]
        if self.feeds.pending() or any(t.backlog for t in tails):
            return {}
        unread = sum(t.skipped for t in tails)
        whole = unread == 0 and not any(t.rewound for t in tails)
        self.fold.deliver_from_files(self.run_dir)
        return self.fold.to_fields() | {"read_whole": whole, "unread_bytes": unread}

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
            problems=self.feeds.problems, final_metric=self.final,
            backlog_bytes=self.feeds.backlog, skipped_bytes=self.feeds.skipped,
            past_bound=self.past_bound)
