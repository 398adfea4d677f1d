"""Stop rules, evaluated on every metrics record and on every engine tick.

The rules are the campaign's announced criteria: non-finite loss, quality past
a bound from a given step on, truncated mandatory inputs, no usable resume,
and a stalled process. A rule that fires returns a `Stop` with the rule, the
value, the step and the time, which the engine records and acts on. The step
is the run's global step (`global_step`: a printed step made monotonic, see
`printed.StepClock`), so `from_step` still holds when a script's printed step
restarts every epoch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..campaign.numbers import is_number
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


def _step(record: dict) -> int | None:
    """The run's global step at this record (printed steps made monotonic), else its step."""
    step = record.get("global_step", record.get("step"))
    return step if is_number(step) else None


def where(record: dict) -> str:
    """`at step N` for a reason text (global step, with the printed one when it differs)."""
    step = _step(record)
    printed = record.get("step")
    if step is None:
        return f"(no step yet, read from {record.get('source', 'metrics.jsonl')})"
    if printed is not None and printed != step:
        return f"at step {step} (printed {printed})"
    return f"at step {step}"


def _time(record: dict, now: float) -> float:
    t = record.get("t")
    return t if is_number(t) else now


def _fmt(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class RuleSet:
    """The rules that apply to one run (its variant or step id)."""

    def __init__(self, rules: tuple[StopRule, ...], target_id: str, kind: str):
        self.rules = [r for r in rules if r.applies_to(target_id)]
        self.kind = kind
        watched = {"event"}
        for r in self.rules:
            watched.update(r.metrics)
            if r.metric:
                watched.add(r.metric)
        self._watched = frozenset(watched)
        self._finite = tuple(n for r in self.rules if r.rule == "non_finite" for n in r.metrics)
        self._by_value = any(r.rule in ("threshold", "truncation") for r in self.rules)

    @property
    def watched(self) -> frozenset[str]:
        """The metric names these rules read (the feeds type-check them as numbers)."""
        return self._watched - {"event"}

    def first_stop(self, records: list[dict], now: float) -> Stop | None:
        """`on_record` over a batch, in order: the first Stop, if any (one call per batch:
        a tqdm bar is a record per update, and most records need one set test)."""
        watched, on_record = self._watched, self.on_record
        finite, only_finite = self._finite, not self._by_value
        for record in records:
            if watched.isdisjoint(record):
                continue
            if only_finite and "event" not in record:  # the common case, inline
                get = record.get
                for name in finite:
                    value = get(name)
                    if value.__class__ is float and value - value != 0.0:  # nan or +-inf
                        break
                else:
                    continue
            stop = on_record(record, now)
            if stop is not None:
                return stop
        return None

    def on_record(self, record: dict, now: float) -> Stop | None:
        if self._watched.isdisjoint(record):  # most records: one set test, done
            return None
        if not self._by_value and "event" not in record:  # only non_finite: one pass
            get = record.get
            for name in self._finite:
                value = get(name)
                if value.__class__ is float and value - value != 0.0:  # nan or +-inf
                    break
            else:
                return None
        for rule in self.rules:
            stop = self._check(rule, record, now)
            if stop:
                return stop
        if record.get("event") == "resume_check" and record.get("ok") is False:
            if any(r.rule == "resume" for r in self.rules):
                return Stop("resume", "resume check failed: "
                            + str(record.get("problem") or
                                  f"max diff {record.get('max_abs_diff')}"),
                            record.get("max_abs_diff"), _step(record), _time(record, now))
        return None

    def _check(self, rule: StopRule, record: dict, now: float) -> Stop | None:
        if rule.rule == "non_finite":
            for name in rule.metrics:
                value = record.get(name)
                # ints are always finite; only a float can be nan/inf
                if value.__class__ is float and not math.isfinite(value):
                    step = _step(record)
                    return Stop("non_finite", f"{name}={_fmt(value)} {where(record)}",
                                value, step, _time(record, now))
            return None
        value = record.get(rule.metric) if rule.metric else None
        if value is None or not is_number(value):
            return None
        step = _step(record)
        if rule.rule == "threshold":
            if step is not None and step < rule.from_step:
                return None
            if rule.below is not None and value < rule.below:
                return Stop("threshold", f"{rule.metric}={_fmt(value)} below {rule.below:g} "
                            f"{where(record)} (bound from step {rule.from_step})", value, step,
                            _time(record, now))
            if rule.above is not None and value > rule.above:
                return Stop("threshold", f"{rule.metric}={_fmt(value)} above {rule.above:g} "
                            f"{where(record)} (bound from step {rule.from_step})", value, step,
                            _time(record, now))
        elif rule.rule == "truncation" and value > rule.max:
            return Stop("truncation", f"{_fmt(value)} mandatory inputs truncated "
                        f"(max {rule.max:g})", value, step, _time(record, now))
        return None

    def on_tick(self, now: float, started: float, last_record: float | None,
                verified_checkpoint: bool, phase: str,
                first_record: float | None = None) -> Stop | None:
        """Times on one clock (the engine's monotonic one). `resume` counts from the
        run's first record (`first_record`; none yet: its clock has not started)."""
        for rule in self.rules:
            if rule.rule == "stall" and rule.minutes:
                quiet_since = last_record if last_record is not None else started
                quiet = now - quiet_since
                if quiet > rule.minutes * 60:
                    return Stop("stall", f"no metrics record for {quiet / 60:.1f} min "
                                f"(limit {rule.minutes:g} min) while the process lives",
                                round(quiet, 1), None, now)
            if (rule.rule == "resume" and rule.within_minutes and phase == "run"
                    and not verified_checkpoint and first_record is not None
                    and now - first_record > rule.within_minutes * 60):
                return Stop("resume", f"no verified checkpoint within {rule.within_minutes:g}"
                            f" min of its first record", None, None, now)
        return None
