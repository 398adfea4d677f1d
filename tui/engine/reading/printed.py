"""Records from what a run prints: stdout and stderr through `[metrics]` patterns.

Each segment of a stream (see `segments`) that yields at least one value is
one record. Within a segment the LAST match of a pattern wins (a progress bar
repeats a metric; its newest value is at the end). A value that is not a
number is counted in `bad_lines`, never raised.

Printed steps are often epoch-local (`200/ 2983 batches`, a bar's `45/100`):
the record keeps the printed `step`, and a `StepClock` shared by both streams
derives `global_step`, which never goes backwards. A printed dict that names
its own step (`'global_step': 20`) takes it; other records with no printed
step carry the global step last seen in either stream (the two files are
read one after the other, so that step may lag by one poll).

HF's Trainer prints its log dicts on stdout with no step, only its own
`epoch` (global step / steps per epoch), and its bar on stderr (none at all
with `disable_tqdm`): the shared clock then dates a dict by a bar read a poll
earlier, or not at all ("step 2" for step 4, "no step yet"). So a dict that
carries `epoch` takes `epoch x steps per epoch` (`EpochSteps`), the steps per
epoch being the trainer's own, read from the `trainer_state.json` of a
checkpoint it saved (its `log_history` pairs each `epoch` with its `step`);
exact to the precision the epoch is printed with (4 significant digits).
"""

from __future__ import annotations

import math
import re
import time
from collections import deque
from pathlib import Path

from ...campaign.numbers import STEP_LIMIT, parse_number, parse_step
from ...campaign.plan import MetricsSpec
from .segments import SegmentTail
from .trainer_state import checkpoint_states, steps_per_epoch

RESCAN_S = 10.0  # how often a run directory is looked at for a new trainer_state.json
MARKS = 256  # bar steps redrawn after a write, kept until a dict takes them


class EpochSteps:
    """The trainer's steps per epoch: from a `trainer_state.json` its checkpoints hold, or
    before the first save from its progress bar.

    The state is looked for at most every RESCAN_S until found (a glob two folders
    deep and one bounded read), then kept: the steps per epoch of one training do
    not change. Anything unreadable is no answer, never an error.

    Before any checkpoint (a NaN at step 4 of a run that saves at 500) the bar
    dates the dicts: HF prints each dict with `tqdm.write`, which clears the bar on
    stderr and redraws it at once at the step just logged. Those redrawn steps are
    `marks` (the stderr feed adds them, `mark`); the i-th dict is the i-th mark's
    (read once the stderr of the same poll is read: the redraw follows the dict).
    A mark that is no dict's (an evaluation bar that closes also clears the line)
    would shift that pairing, so the steps per epoch it implies are only kept once
    a dict at another epoch lands on a mark too (`epoch x steps per epoch`); from
    then on every dict is dated by its epoch, as with the state. With neither (a
    run with `disable_tqdm` that has not saved yet) there is no answer."""

    def __init__(self, run_dir: Path, monotonic=time.monotonic):
        self.run_dir = Path(run_dir)
        self.monotonic = monotonic
        self.per_epoch: float | None = None
        self.from_state = False  # per_epoch read from trainer_state.json (else from marks)
        self.marks: deque[int] = deque(maxlen=MARKS)
        self._guess: tuple[float, float] | None = None  # (epoch, steps per epoch) unconfirmed
        self._bounds: tuple[float, float] | None = None  # of per_epoch, from the marks
        self._next = float("-inf")

    def mark(self, step: int) -> None:
        """A step the bar was redrawn at just after something was written above it."""
        self.marks.append(step)

    def step_of(self, epoch) -> int | None:
        if not isinstance(epoch, float) or not math.isfinite(epoch) or epoch <= 0:
            return None
        if not self.from_state and self.monotonic() >= self._next:
            self._next = self.monotonic() + RESCAN_S
            found = self._read()
            if found is not None:
                self.per_epoch, self.from_state = found, True
        if self.per_epoch is None:
            step = self._paired(epoch)
        else:
            step = round(epoch * self.per_epoch)
            if not self.from_state and self._take(step):
                self._narrow(epoch, step)
        return step if step is not None and 0 < step < STEP_LIMIT else None

    def step_at(self, epoch) -> int | None:
        """The step of a dict at `epoch` once the steps per epoch are known (None before):
        a dict read before the first save, dated afterwards (the step a run's records began
        at, `RunLive.first_step`). Uses no mark up."""
        if not isinstance(epoch, float) or not math.isfinite(epoch) or epoch <= 0 \
                or self.per_epoch is None:
            return None
        step = round(epoch * self.per_epoch)
        return step if 0 < step < STEP_LIMIT else None

    def _narrow(self, epoch: float, step: int) -> None:
        """Steps per epoch from a dict at `epoch` redrawn at `step`: the epoch is printed
        to 4 significant digits, so each such pair bounds it; the bounds of every pair
        narrow it (a pair that contradicts them starts them again)."""
        half = 0.5 * 10.0 ** (math.floor(math.log10(epoch)) - 3)
        lo, hi = step / (epoch + half), step / max(epoch - half, 1e-12)
        if self._bounds is not None and max(lo, self._bounds[0]) <= min(hi, self._bounds[1]):
            lo, hi = max(lo, self._bounds[0]), min(hi, self._bounds[1])
        self._bounds = (lo, hi)
        self.per_epoch = (lo + hi) / 2

    def _paired(self, epoch: float) -> int | None:
        """A dict's step before the steps per epoch are known: its own mark."""
        if self._guess is not None:
            then, per_epoch = self._guess
            step = round(epoch * per_epoch)
            if self._take(step):
                if epoch != then:  # a second epoch on the same line: confirmed
                    self._narrow(then, round(then * per_epoch))
                    self._narrow(epoch, step)
                return step
        if not self.marks:
            return None
        step = self.marks.popleft()
        if step > 0:
            self._guess = (epoch, step / epoch)
        return step

    def _take(self, step: int) -> bool:
        """Whether `step` is a mark; if so it and the marks before it are used up."""
        if step not in self.marks:
            return False
        while self.marks and self.marks[0] <= step:
            self.marks.popleft()
        return True

    def _read(self) -> float | None:
        return steps_per_epoch(checkpoint_states(self.run_dir))


class StepClock:
    """A monotonic global step from printed steps that may restart each epoch.

    While the printed step grows, global = offset + printed. When it goes
    backwards (a new epoch), the offset grows by the length of the cycle that
    just ended: the printed `step_total` when the script prints one (exact:
    `2983` of `200/ 2983 batches`), else the last printed step. A step printed
    with a different total than the first one seen belongs to another bar
    (an evaluation loop's) and does not move the clock. The global step is
    never lowered.
    """

    def __init__(self):
        self.offset = 0
        self.last_printed: int | None = None
        self.total: int | None = None
        self.global_step: int | None = None

    def observe(self, printed: int, total: int | None = None) -> int | None:
        if total is not None:
            if self.total is None:
                self.total = total
            elif total != self.total:
                return self.global_step  # another progress bar: not the training step
        if self.last_printed is not None and printed < self.last_printed:
            self.offset += max(self.last_printed, self.total or 0)
        self.last_printed = printed
        value = self.offset + printed
        if self.global_step is None or value > self.global_step:
            self.global_step = value
        return self.global_step


class PrintedFeed:
    """Records from one printed stream (`stdout.log` or `stderr.log`) of a run."""

    def __init__(self, path: Path, stream: str, spec: MetricsSpec,
                 clock: StepClock | None = None, epochs: EpochSteps | None = None):
        self.tail = SegmentTail(path, printed=True)
        self.stream = stream
        self.clock = clock or StepClock()
        self.epochs = epochs  # HF's log dicts: their step from their own `epoch`
        # one list per way of reading a pattern's text, so the hot loop has no dispatch
        self.steps, self.totals, self.numbers, self.grouped = [], [], [], []
        for p in spec.patterns:
            if stream in p.streams:
                rx = re.compile(p.pattern)
                if rx.groups > 1:
                    self.grouped.append((p.name, rx.findall))
                elif p.name == "step":
                    self.steps.append(rx.findall)
                elif p.name == "step_total":
                    self.totals.append(rx.findall)
                else:
                    self.numbers.append((p.name, rx.findall))
        self.pairs = [(re.compile(p.within), re.compile(p.pair), frozenset(p.ignore))
                      for p in spec.pairs if stream in p.streams]
        self.aliases = spec.aliases
        self.records = 0
        self.bad_lines = 0
        self.undated: list[dict] = []  # HF dicts of this round, dated at `settle`
        self._after_clear = False  # the last segment cleared the bar (tqdm.write)

    @property
    def more(self) -> bool:
        return self.tail.more

    def poll(self) -> list[dict]:
        """Records of the next chunk of the stream (call again while `more`).

        The hot loop of a print-only run (a tqdm bar is a record per update),
        so it is written for speed: bound methods, locals, and no helper call
        on the common path (a plain float, a plain int step)."""
        out: list[dict] = []
        segments = self.tail.read()
        steps, totals, numbers, grouped = self.steps, self.totals, self.numbers, self.grouped
        pairs, aliases = self.pairs, self.aliases
        if not (steps or totals or numbers or grouped or pairs):
            return out
        clock, stream, append = self.clock, self.stream, out.append
        marking, after_clear = self.epochs is not None and bool(steps), self._after_clear
        for segment in segments:
            if not segment:
                continue
            if marking and segment.isspace():
                after_clear = True  # tqdm.write cleared the bar: its redraw comes next
                continue
            record = self._pairs(segment) if pairs else {}
            for name, findall in numbers:
                found = findall(segment)
                if found:
                    try:
                        record[name] = float(found[-1])  # the last match of the segment wins
                    except ValueError:
                        self._number(record, name, found[-1])
            if grouped:
                for name, findall in grouped:
                    found = findall(segment)
                    if found:  # several groups: the first that took part
                        self._number(record, name, next((g for g in found[-1] if g), ""))
            step = total = None
            for findall in steps:
                found = findall(segment)
                if found:
                    try:
                        step = int(found[-1])
                    except ValueError:
                        step = self._step(found[-1])
                    else:
                        if not 0 <= step < STEP_LIMIT:
                            step = self._step(found[-1])
            if totals:
                for findall in totals:
                    found = findall(segment)
                    if found:
                        total = self._step(found[-1])
            if step is None and pairs and record:
                step = _own_step(record)  # a printed dict that carries its step
                if step is None and self.epochs is not None and "epoch" in record:
                    self.undated.append(record)  # HF: epoch x steps/epoch, at `settle`
            cleared, after_clear = after_clear, False
            if step is not None:
                record["step"] = step
                if total is not None:
                    record["step_total"] = total
                step = clock.observe(step, total)
                if cleared and (total is None or total == clock.total):
                    self.epochs.mark(step)  # the training bar redrawn after a dict
            elif not record:
                continue
            else:
                step = clock.global_step
            if aliases:
                _alias(record, aliases)
            if step is not None:
                record["global_step"] = step
            else:  # no step in any stream yet: where it is, for a reason to name
                record["record"] = self.records + len(out) + 1
            record["source"] = stream
            append(record)
        if after_clear:  # the redraw after a clear is ended only by the next one: peek
            after_clear = self._mark_pending()
        self._after_clear = after_clear
        self.records += len(out)
        return out

    def _mark_pending(self) -> bool:
        """Mark the training bar's redraw held unterminated in the tail (it is read as a
        record when the next redraw ends it); whether the clear still waits for it."""
        text = self.tail.pending()
        step = total = None
        for findall in self.steps:
            found = findall(text)
            if found and found[-1].isdigit():
                step = int(found[-1])
        for findall in self.totals:
            found = findall(text)
            if found and found[-1].isdigit():
                total = int(found[-1])
        if step is None or not 0 <= step < STEP_LIMIT:
            return True
        step = self.clock.observe(step, total)
        if total is None or total == self.clock.total:
            self.epochs.mark(step)
        return False

    def settle(self) -> None:
        """Date the HF dicts read since the last call by their `epoch` (`EpochSteps`), once
        the other stream of the same round is read: the bar's redraw after a dict is on
        stderr, written after it. A dict that cannot be dated keeps the clock's step."""
        undated, self.undated = self.undated, []
        clock = self.clock
        for record in undated:
            exact = self.epochs.step_of(record["epoch"])
            if exact is not None:
                record["global_step"] = exact
                record.pop("record", None)
                if clock.global_step is None or exact > clock.global_step:
                    clock.global_step = exact

    def _number(self, record: dict, name: str, text: str) -> None:
        value = parse_number(text)
        if value is None:
            self.bad_lines += 1
        else:
            record[name] = value

    def _step(self, text: str) -> int | None:
        value = parse_step(text)
        if value is None:
            self.bad_lines += 1
        return value

    def _pairs(self, segment: str) -> dict:
        record: dict = {}
        for within, pair, ignore in self.pairs:
            m = within.search(segment)
            if m is None or not m.group(1):
                continue
            for name, text in pair.findall(m.group(1)):
                value = parse_number(text)
                if value is not None and name not in ignore:
                    record[name] = value
        return record


def _own_step(record: dict) -> int | None:
    """The step a printed dict names itself (`'global_step': 20` or `'step': 20`): exact,
    where the shared clock's step (another stream's bar) may lag."""
    for key in ("global_step", "step"):
        value = record.get(key)
        if isinstance(value, float) and value.is_integer() and 0 <= value < STEP_LIMIT:
            del record[key]
            return int(value)
    return None


def _alias(record: dict, aliases) -> None:
    for name, sources in aliases:
        if name not in record:
            for source in sources:
                if source in record:
                    record[name] = record[source]
                    break
