"""Stop rules, evaluated on every metrics record and on every engine tick.

The rules are the campaign's announced criteria: non-finite loss, quality past
a bound from a given step on, truncated mandatory inputs, no usable resume,
a stalled process, a loss that exploded while it stayed finite, and GPUs left
idle. Each `[[stop]]` of the plan becomes one small rule object (`build`), and
every rule answers the same three questions: `on_record` (does this metrics
record stop the run?), `on_tick` (does the time that passed stop it?) and
`on_gpu` (does this GPU sample of the run's own GPUs stop it?). A rule that
fires returns a `Stop` with the rule, the value, the step and the time, which
the engine records and acts on (see ARCHITECTURE.md, "Where a NaN line becomes
a SIGTERM").

The step is the run's global step (`global_step`: a printed step made
monotonic, see `printed.StepClock`), so `from_step` still holds when a script's
printed step restarts every epoch.

Non-finite values have one test, `first_non_finite`: the `NonFinite` rule and
the batch fast path of `RuleSet.first_stop` both call it.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import ClassVar, Protocol

from ..campaign.loading.sections import rule_label
from ..campaign.numbers import is_finite_number, is_number
from ..campaign.plan import StopRule


@dataclass(frozen=True)
class Stop:
    """A stop rule fired: which rule, why in words, and the value and step it saw."""
    rule: str
    reason: str
    value: float | str | None
    step: int | None
    t: float

    def to_dict(self) -> dict:
        value = self.value
        if isinstance(value, float) and not math.isfinite(value):
            value = str(value)  # JSON has no nan/inf: keep "nan", "inf" readable
        return {"rule": self.rule, "reason": self.reason, "value": value,
                "step": self.step, "t": self.t}


@dataclass(frozen=True)
class Tick:
    """What a rule may read at an engine tick, every time on the engine's monotonic
    clock: now, when the run started, when its first and last records came, whether
    it has a verified (or pending) checkpoint, and its kind (`run` or `step`)."""
    now: float
    started: float
    last_record: float | None
    verified_checkpoint: bool
    phase: str
    first_record: float | None = None  # none yet: the resume clock has not started


def _step(record: dict) -> int | None:
    """The run's global step at this record (printed steps made monotonic), else its step."""
    step = record.get("global_step", record.get("step"))
    return step if is_number(step) else None


def where(record: dict) -> str:
    """`at step N` for a reason text (global step, with the printed one when it differs)."""
    step = _step(record)
    printed = record.get("step")
    if step is None:  # a printed record: its place in its stream (none printed a step)
        source, position = record.get("source", "metrics.jsonl"), record.get("record")
        if isinstance(position, int) and not isinstance(position, bool):
            return f"at record {position} of {source} (no step printed)"
        return f"(no step yet, read from {source})"
    if printed is not None and printed != step:
        return f"at step {step} (printed {printed})"
    return f"at step {step}"


def _time(record: dict, now: float) -> float:
    t = record.get("t")
    return t if is_number(t) else now


def _fmt(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def first_non_finite(record: dict, names: tuple[str, ...]) -> str | None:
    """The first of `names` whose value in `record` is nan or +-inf, else None.

    The one non-finite test. Ints are always finite, only a float can be nan/inf;
    `v - v != 0.0` is true exactly for nan and +-inf and costs no call."""
    get = record.get
    for name in names:
        value = get(name)
        if value.__class__ is float and value - value != 0.0:
            return name
    return None


class Rule(Protocol):
    """One stop rule: the metric names it reads, asked per record and per tick."""
    name: ClassVar[str]
    reads: frozenset[str]

    def on_record(self, record: dict, now: float) -> Stop | None: ...

    def on_tick(self, tick: Tick) -> Stop | None: ...

    def on_gpu(self, now: float, utils: tuple[float | None, ...]) -> Stop | None: ...


class _Quiet:
    """The default answers: a rule that reads no record or no tick says nothing."""
    reads: frozenset[str] = frozenset()

    def on_record(self, record: dict, now: float) -> Stop | None:
        return None

    def on_tick(self, tick: Tick) -> Stop | None:
        return None

    def on_gpu(self, now: float, utils: tuple[float | None, ...]) -> Stop | None:
        return None


class NonFinite(_Quiet):
    """`rule = "non_finite"`: any of `metrics` is nan or +-inf."""
    name = "non_finite"

    def __init__(self, spec: StopRule):
        self.metrics = tuple(spec.metrics)
        self.reads = frozenset(self.metrics)

    def on_record(self, record: dict, now: float) -> Stop | None:
        name = first_non_finite(record, self.metrics)
        if name is None:
            return None
        value = record[name]
        return Stop(self.name, f"{name}={_fmt(value)} {where(record)}", value, _step(record),
                    _time(record, now))


class Threshold(_Quiet):
    """`rule = "threshold"`: `metric` below `below` or above `above`, from `from_step` on."""
    name = "threshold"

    def __init__(self, spec: StopRule):
        self.metric, self.below, self.above = spec.metric, spec.below, spec.above
        self.from_step = spec.from_step
        self.reads = frozenset((spec.metric,)) if spec.metric else frozenset()

    def on_record(self, record: dict, now: float) -> Stop | None:
        value = record.get(self.metric) if self.metric else None
        if value is None or not is_number(value):
            return None
        if self.below is not None and value < self.below:
            side, bound = "below", self.below
        elif self.above is not None and value > self.above:
            side, bound = "above", self.above
        else:
            return None  # the common case, every record: its step is not even looked up
        step = _step(record)
        if step is not None and step < self.from_step:
            return None
        return Stop(self.name, f"{self.metric}={_fmt(value)} {side} {bound:g} "
                    f"{where(record)} (bound from step {self.from_step})", value, step,
                    _time(record, now))


class Truncation(_Quiet):
    """`rule = "truncation"`: more than `max` mandatory inputs truncated."""
    name = "truncation"

    def __init__(self, spec: StopRule):
        self.metric, self.max = spec.metric, spec.max
        self.reads = frozenset((spec.metric,)) if spec.metric else frozenset()

    def on_record(self, record: dict, now: float) -> Stop | None:
        value = record.get(self.metric) if self.metric else None
        if value is None or not is_number(value) or not value > self.max:
            return None
        return Stop(self.name, f"{_fmt(value)} mandatory inputs truncated "
                    f"(max {self.max:g})", value, _step(record), _time(record, now))


class Resume(_Quiet):
    """`rule = "resume"`: a failed resume check, or no verified checkpoint within
    `within_minutes` of a run's start."""
    name = "resume"

    def __init__(self, spec: StopRule):
        self.within_minutes = spec.within_minutes

    def on_record(self, record: dict, now: float) -> Stop | None:
        if record.get("event") != "resume_check" or record.get("ok") is not False:
            return None
        problem = record.get("problem") or f"max diff {record.get('max_abs_diff')}"
        return Stop(self.name, f"resume check failed: {problem}", record.get("max_abs_diff"),
                    _step(record), _time(record, now))

    def on_tick(self, tick: Tick) -> Stop | None:
        if (self.within_minutes and tick.phase == "run" and not tick.verified_checkpoint
                and tick.first_record is not None
                and tick.now - tick.first_record > self.within_minutes * 60):
            return Stop(self.name, f"no verified checkpoint within {self.within_minutes:g}"
                        f" min of its first record", None, None, tick.now)
        return None


class Stall(_Quiet):
    """`rule = "stall"`: no metrics record for `minutes` while the process lives.

    The stall clock starts at the run's first record: before it the process is still
    starting (importing, loading a model, a torchrun rendezvous, a slow disk), which
    can last far longer than a stall limit sized for the gap between two steps. Until
    that first record the start-up limit applies instead (`startup_minutes`, generous
    by default), and its stop is named `start-up` (`STARTUP`), never `stall`: a process
    that never started training says nothing about its variant."""
    name = "stall"

    def __init__(self, spec: StopRule):
        self.minutes = spec.minutes
        self.startup = spec.startup_limit_minutes

    def on_tick(self, tick: Tick) -> Stop | None:
        if not self.minutes:
            return None
        if tick.last_record is None:
            waited = tick.now - tick.started
            if waited <= self.startup * 60:
                return None
            return Stop(STARTUP, f"no first metrics record {waited / 60:.1f} min after its "
                        f"start (start-up limit {self.startup:g} min: importing, loading, "
                        "rendezvous) while the process lives", round(waited, 1), None,
                        tick.now)
        quiet = tick.now - tick.last_record
        if quiet <= self.minutes * 60:
            return None
        return Stop(self.name, f"no metrics record for {quiet / 60:.1f} min "
                    f"(limit {self.minutes:g} min) while the process lives",
                    round(quiet, 1), None, tick.now)


STARTUP = "start-up"  # the stop of a process that gave no first record in its start-up limit


class Diverged(_Quiet):
    """`rule = "diverged"`: `metric` above `factor` times the run's own first figures.

    A run that explodes and stays finite (a loss of 1e8 from too high a learning rate)
    passes `non_finite` and, without this rule, completes as an accepted model. Like
    Lightning's `divergence_threshold`, but relative, so one rule fits every variant:
    the baseline is the median of the run's first `baseline_records` finite figures
    (one odd early figure neither raises nor lowers it), and any later figure above
    `factor` times it stops the run. A baseline at or below zero cannot be multiplied
    into a bound (the rule is for a positive loss): the rule then stays quiet. The
    state is the run's own: `RuleSet` builds one object per run, and after an engine
    restart the run's records are read again from their start."""
    name = "diverged"

    def __init__(self, spec: StopRule):
        self.metric = spec.metric or "loss"
        self.factor = spec.factor or 0.0
        self.count = spec.baseline_records
        self.reads = frozenset((self.metric,))
        self._first: list[float] = []
        self.baseline: float | None = None

    def on_record(self, record: dict, now: float) -> Stop | None:
        value = record.get(self.metric)
        if "event" in record or not is_finite_number(value):
            return None  # non-finite values are `non_finite`'s to stop
        if self.baseline is None:
            self._first.append(float(value))
            if len(self._first) == self.count:
                self.baseline = statistics.median(self._first)
            return None
        if self.baseline <= 0 or not value > self.factor * self.baseline:
            return None
        return Stop(self.name, f"{self.metric}={_fmt(value)} {where(record)}, over "
                    f"{self.factor:g} x its baseline {self.baseline:g} (the median of its "
                    f"first {self.count} figures): diverged", value, _step(record),
                    _time(record, now))


class GpuIdle(_Quiet):
    """`rule = "gpu_idle"`: every one of the run's GPUs under `below_percent` for
    `minutes`, in every sample of the window.

    A deadlocked data loader, a hung NCCL collective or a script waiting on input holds
    the rented GPUs at 0 % while it may still print: `stall` hears the prints, the metric
    rules wait for a figure. This rule reads what NVML says of the run's own GPUs (the
    engine picks them: `watchdog.run_utils`) on the engine's monotonic clock. A sample it
    cannot judge (no GPU of the run in it, a utilisation NVML did not give, a lost GPU)
    or one GPU at or over the floor starts the window again: only a window of samples
    that all say idle stops a run. Its window is refused below `GPU_IDLE_MIN_MINUTES`
    by the loader."""
    name = "gpu_idle"
    label = rule_label(name)  # how every view names its stop

    def __init__(self, spec: StopRule):
        self.below = spec.below_percent or 0.0
        self.minutes = spec.minutes or 0.0
        self.idle_since: float | None = None
        self.highest = 0.0  # the busiest figure seen in the window so far

    def on_gpu(self, now: float, utils: tuple[float | None, ...]) -> Stop | None:
        if not utils or any(u is None or not u < self.below for u in utils):
            self.idle_since = None
            return None
        highest = max(utils)
        if self.idle_since is None:
            self.idle_since, self.highest = now, highest
            return None
        self.highest = max(self.highest, highest)
        idle = now - self.idle_since
        if idle < self.minutes * 60:
            return None
        gpus = "its GPU" if len(utils) == 1 else f"all {len(utils)} of its GPUs"
        return Stop(self.name, f"{gpus} under {self.below:g} % for "
                    f"{idle / 60:.1f} min (window {self.minutes:g} min, busiest sample "
                    f"{self.highest:g} %) while the process lives", self.highest, None, now)


RULES: dict[str, type] = {cls.name: cls for cls in (NonFinite, Threshold, Truncation,
                                                     Resume, Stall, Diverged, GpuIdle)}



def build(spec: StopRule) -> Rule:
    """The rule object for one `[[stop]]` of the plan (the loader has checked its name)."""
    return RULES[spec.rule](spec)


class RuleSet:
    """The rules that apply to one run (its variant or step id)."""

    def __init__(self, rules: tuple[StopRule, ...], target_id: str, kind: str):
        self.rules: tuple[Rule, ...] = tuple(build(r) for r in rules
                                             if r.applies_to(target_id))
        self.kind = kind
        reads: set[str] = set()
        for rule in self.rules:
            reads |= rule.reads
        self._reads = frozenset(reads)
        self._watched = self._reads | {"event"}  # event records reach every rule
        self._finite = tuple(n for r in self.rules if isinstance(r, NonFinite)
                             for n in r.metrics)
        # only non_finite rules read values: a record without an event and without a
        # non-finite value can be skipped after one test
        self._only_finite = all(isinstance(r, (NonFinite, Resume, Stall, GpuIdle))
                                for r in self.rules)
        self._gpu = tuple(r for r in self.rules if isinstance(r, GpuIdle))

    @property
    def watches_gpu(self) -> bool:
        """Whether a rule here reads GPU samples (the engine picks the run's GPUs only then)."""
        return bool(self._gpu)

    def on_gpu(self, now: float, utils: tuple[float | None, ...]) -> Stop | None:
        """A GPU sample at `now` (monotonic): the utilisation of each of the run's GPUs."""
        for rule in self._gpu:
            stop = rule.on_gpu(now, utils)
            if stop is not None:
                return stop
        return None

    @property
    def watched(self) -> frozenset[str]:
        """The metric names these rules read (the feeds type-check them as numbers)."""
        return self._reads

    @property
    def finite_watched(self) -> frozenset[str]:
        """The names the `non_finite` rules test: when `first_stop` over a batch returns
        None, no record of it holds a non-finite value of any of them."""
        return frozenset(self._finite)

    def first_stop(self, records: list[dict], now: float) -> Stop | None:
        """`on_record` over a batch, in order: the first Stop, if any (one call per batch,
        its tests in locals: a tqdm bar is a record per update, and most records need
        one set test, or one non-finite test)."""
        watched, finite, only_finite = self._watched, self._finite, self._only_finite
        ask = self._ask_rules
        for record in records:
            if watched.isdisjoint(record):
                continue
            if only_finite and "event" not in record \
                    and first_non_finite(record, finite) is None:
                continue
            stop = ask(record, now)
            if stop is not None:
                return stop
        return None

    def on_record(self, record: dict, now: float) -> Stop | None:
        """The first Stop this record raises, if any."""
        return self.first_stop([record], now)

    def _ask_rules(self, record: dict, now: float) -> Stop | None:
        for rule in self.rules:
            stop = rule.on_record(record, now)
            if stop is not None:
                return stop
        return None

    def on_tick(self, now: float, started: float, last_record: float | None,
                verified_checkpoint: bool, phase: str,
                first_record: float | None = None) -> Stop | None:
        """Times on one clock (the engine's monotonic one). `resume` counts from the
        run's first record (`first_record`; none yet: its clock has not started)."""
        tick = Tick(now, started, last_record, verified_checkpoint, phase, first_record)
        for rule in self.rules:
            stop = rule.on_tick(tick)
            if stop is not None:
                return stop
        return None
