"""Every kind of ledger event, as a frozen record with typed fields.

A campaign is its ledger; this module is what a ledger line can say. Each kind is
one class here: its fields, their types (enums where the values are a closed
set), and what may be absent from its line. The checks a line must pass before a
replay reads it are derived from these annotations (no table of fields stands
beside them), and so is the JSON line: `to_record()` gives the fields in the
order the class declares them, which is the order the engine has always written
them, so a line written today is byte-for-byte a line of the releases before, and
every old ledger still replays.

Text becomes an event at two edges only: a ledger line read back (`from_record`,
after `problem_of` passed) and a JSON object from the wire. Producers build the
classes (`journal.record(StopRuleFired(run=..., ...))`), the state builder
dispatches on the class, and the views read attributes.

A field declared with `= opt()` may be absent from a line (its attribute is then
None, and `to_record()` leaves it out, as the line did); `opt(null=False)`: when
present it may not be null. A field with no default must be in every line.
"""

from __future__ import annotations

import enum
import reprlib
import sys
import time
import typing
from dataclasses import MISSING, dataclass, field, fields
from enum import StrEnum
from typing import Annotated, ClassVar

from ...campaign.loading.sections import DECISION_DEFAULTS, rule_label  # [pilot] default
from ...campaign.units import human_duration, human_hours, lot_text
from .kinds import (BOOL, CONFIG, FINITE, INT, NUMBER, PID, PILOT, PROCESSES, SCALAR, STR,
                    STR_LIST, STR_MAP, TABLE, TIME, Kind, one_of, shown)

Time = Annotated[float, TIME]
Pid = Annotated[int, PID]
Number = Annotated[float, NUMBER]  # a step a rule read may be a float, even NaN
Scalar = Annotated[object, SCALAR]
Config = Annotated[dict, CONFIG]
PilotFigures = Annotated[dict, PILOT]
Processes = Annotated[tuple, PROCESSES]
StrMap = Annotated[dict, STR_MAP]


class RunKind(StrEnum):
    """What a launched run is for: a plan step, a pilot, a full run, a post step."""
    STEP = "step"
    PILOT = "pilot"
    RUN = "run"
    POST = "post"


class DecisionKind(StrEnum):
    """What the decision point answered."""
    CONTINUE = "continue"
    DROP = "drop"
    WRAPUP = "wrapup"


class DecidedBy(StrEnum):
    """Who answered the decision point, as the ledger writes it. The values are the ones
    the engine has always written ("user" and "cli" included), so old ledgers read."""
    PERSON = "user"  # a person, before the room and the command were told apart
    ROOM = "room"  # a person, in the control room
    COMMAND = "command"  # a person, with `itera-tui decide`
    FLAG = "cli"  # `--decide` given when the campaign started (run --headless, engine start)
    PLAN = "config"  # the plan's `[pilot] decide`
    DEADLINE = "deadline"  # nobody answered in time: the default was taken
    INFERRED = "inferred"  # its decision_taken line was lost: read from what followed

    @property
    def words(self) -> str:
        return _DECIDED_BY_WORDS[self]

    @classmethod
    def of_client(cls, name: str | None) -> "DecidedBy":
        """A decision sent by a face that said its name at hello (`room`, `cli`)."""
        return {"room": cls.ROOM, "cli": cls.COMMAND}.get(name or "", cls.PERSON)


_DECIDED_BY_WORDS = {
    DecidedBy.PERSON: "a person: the room or `itera-tui decide`",
    DecidedBy.ROOM: "a person, in the room",
    DecidedBy.COMMAND: "a person, with `itera-tui decide`",
    DecidedBy.FLAG: "`run --headless --decide`",
    DecidedBy.PLAN: "the plan: [pilot] decide",
    DecidedBy.DEADLINE: "the deadline: nobody answered in time",
    DecidedBy.INFERRED: "inference: its ledger line was lost, what followed shows it"}


def decided_by_words(by) -> str:
    """Who decided, in words; a value a newer release wrote is shown as it is."""
    try:
        return DecidedBy(by).words
    except ValueError:
        return str(by)


DROPPED_BY_DECISION = "decision by "  # a VariantDropped's reason, then the DecidedBy value

RUN_KINDS = tuple(k.value for k in RunKind)
DECISIONS = tuple(d.value for d in DecisionKind)


class _Absent:
    """Not in the line: the attribute reads None, `to_record()` leaves the field out."""
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT = _Absent()
_NONE_OMITTED = frozenset()


def opt(null: bool = True):
    """A field that may be absent from the line; `null`: whether it may be null."""
    return field(default=ABSENT, metadata={"null": null})


@dataclass(frozen=True)
class FieldSpec:
    """One field as the ledger checks and writes it (derived from the annotation)."""
    name: str
    kind: Kind
    required: bool
    nullable: bool
    convert: typing.Callable | None  # JSON value -> the attribute's type (tuple, enum)


@dataclass(frozen=True, kw_only=True)
class Event:
    """A ledger event: its kind, its place (`seq`) and time (`t`, stamped by the ledger)."""

    KIND: ClassVar[str] = ""
    SPECS: ClassVar[tuple[FieldSpec, ...]] = ()
    _NAMES: ClassVar[frozenset] = frozenset({"seq", "t"})
    _FIELDS: ClassVar[tuple[str, ...]] = ("seq", "t")  # every field, in declared order
    _OPTIONAL: ClassVar[tuple[str, ...]] = ()  # the fields declared `= opt()`
    _CONVERTS: ClassVar[tuple[tuple[str, typing.Callable], ...]] = ()  # (field, to its type)
    seq: int = 0
    t: float = 0.0

    # Written once here, not generated per class: `@event` makes its class a dataclass
    # without them (each generated method is an exec, and the room imports every kind
    # before its first paint). They behave as the generated ones did.
    def __eq__(self, other):
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self._FIELDS)

    def __hash__(self):
        return hash(tuple(getattr(self, name) for name in self._FIELDS))

    @reprlib.recursive_repr()
    def __repr__(self) -> str:
        shown_fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self._FIELDS)
        return f"{type(self).__qualname__}({shown_fields})"

    def __post_init__(self):
        # only the fields that may be absent or are converted are looked at (`@event`
        # lists them): an event is made at every append
        attributes = self.__dict__
        omitted = [name for name in self._OPTIONAL if attributes[name] is ABSENT]
        for name in omitted:
            attributes[name] = None
        for name, convert in self._CONVERTS:
            value = attributes[name]
            if value is not None:
                attributes[name] = convert(value)
        attributes["_omitted"] = frozenset(omitted) if omitted else _NONE_OMITTED
        attributes["_extra"] = {}  # fields a newer release wrote (from_record)

    @property
    def kind_name(self) -> str:
        return self.KIND

    def describe(self) -> str | None:
        """Its line in the events panel and the headless log (raw: `lines.describe`
        cleans it for a terminal), or None for bookkeeping not worth a line."""
        return None

    def has(self, name: str) -> bool:
        """Whether the line carries this field (absent and null are not the same)."""
        return name not in self._omitted and (name in self._NAMES or name in self._extra)

    def to_record(self) -> dict:
        """The JSON object of its ledger line (without the checksum), in the written order."""
        record = {"seq": self.seq, "t": self.t, "event": self.KIND}
        for spec in self.SPECS:
            if spec.name not in self._omitted:
                record[spec.name] = getattr(self, spec.name)
        record.update(self._extra)
        return record

    @property
    def box(self) -> str | None:
        """The box whose ledger holds it, for a room that shows several (None: this one)."""
        return self.__dict__.get("_box")

    def _with(self, **attributes) -> "Event":
        """A copy with these attributes changed, omitted and extra fields kept (replace()
        would run __init__ again and lose which fields the line left out)."""
        new = object.__new__(type(self))
        object.__setattr__(new, "__dict__", self.__dict__ | attributes)
        return new

    def on_box(self, box: str) -> "Event":
        """The same event, said to come from another box's ledger."""
        return self._with(_box=box)

    def stamped(self, seq: int, t: float) -> "Event":
        """The same event at its place in the ledger (what `Ledger.append` returns)."""
        return self._with(seq=seq, t=t)

    # -- the JSON view, read by code written when events were dicts ---------------------
    def __getitem__(self, name: str):
        if name == "event":
            return self.KIND
        if name in self._extra:
            return self._extra[name]
        if name in self._omitted or name not in self._NAMES:
            raise KeyError(name)
        value = getattr(self, name)
        return list(value) if isinstance(value, tuple) else value  # as the line's JSON

    def get(self, name: str, default=None):
        try:
            return self[name]
        except KeyError:
            return default

    def __contains__(self, name) -> bool:
        return name == "event" or (isinstance(name, str) and self.has(name))

    def keys(self):
        return self.to_record().keys()

    def items(self):
        return self.to_record().items()

    def __iter__(self):
        return iter(self.to_record())


@dataclass(frozen=True, kw_only=True)
class UnknownEvent(Event):
    """A kind this release does not know (written by a newer one): history, not damage."""

    name: str = ""

    @property
    def kind_name(self) -> str:
        return self.name

    def to_record(self) -> dict:
        return {"seq": self.seq, "t": self.t, "event": self.name, **self._extra}

    def __getitem__(self, name: str):
        if name == "event":
            return self.name
        if name in ("seq", "t"):
            return getattr(self, name)
        return self._extra[name]

    def has(self, name: str) -> bool:
        return name in ("seq", "t") or name in self._extra


def clock_text(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def _named(processes) -> str:
    return ", ".join(f"{p.get('name')} (pid {p.get('pid')}, {p.get('how')})"
                     for p in processes or () if isinstance(p, dict))


EVENT_TYPES: dict[str, type[Event]] = {}
COMMON = (FieldSpec("seq", INT, True, False, None), FieldSpec("t", TIME, True, False, None),
          FieldSpec("event", STR, True, False, None))


def _check_rows(specs) -> tuple[tuple, ...]:
    """The checks of `problem_of` as plain tuples: it runs at every append and for every
    line read, and unpacking a tuple is cheaper than reading a dataclass's attributes."""
    return tuple((spec.name, spec.kind.accepts, spec.required, spec.nullable, spec.kind)
                 for spec in specs)


_COMMON_CHECKS = _check_rows(COMMON)


def _spec_of(name: str, hint, dataclass_field) -> FieldSpec:
    required = dataclass_field.default is MISSING and dataclass_field.default_factory is MISSING
    nullable = False
    kind = None
    if typing.get_origin(hint) is Annotated:
        hint, kind = typing.get_args(hint)[0], typing.get_args(hint)[1]
    args = typing.get_args(hint)
    if type(None) in args:  # X | None
        nullable = True
        rest = [a for a in args if a is not type(None)]
        hint = rest[0] if len(rest) == 1 else hint
        if typing.get_origin(hint) is Annotated:
            hint, kind = typing.get_args(hint)[0], typing.get_args(hint)[1]
    if not required:
        nullable = dataclass_field.metadata.get("null", True) and nullable
    convert = None
    if kind is None:
        if isinstance(hint, type) and issubclass(hint, enum.Enum):
            kind = one_of(*(m.value for m in hint))
            convert = hint
        elif hint is str:
            kind = STR
        elif hint is bool:
            kind = BOOL
        elif hint is int:
            kind = INT
        elif hint is float:
            kind = FINITE
        elif typing.get_origin(hint) is tuple:
            kind, convert = STR_LIST, tuple
        elif hint is dict or typing.get_origin(hint) is dict:
            kind = TABLE
        else:
            raise TypeError(f"ledger field {name}: no check derived from {hint!r}")
    elif hint is tuple:
        convert = tuple
    return FieldSpec(name, kind, required, nullable, convert)


_OWN_HINTS: dict[type, dict] = {}


def _field_hints(cls) -> dict:
    """The annotations of `cls` and its bases, evaluated as
    `typing.get_type_hints(cls, include_extras=True)` evaluates them, but each class's
    own once: get_type_hints evaluates every base's again for every kind."""
    hints: dict = {}
    for base in reversed(cls.__mro__[:-1]):  # object's none
        own = _OWN_HINTS.get(base)
        if own is None:
            scope = sys.modules[base.__module__].__dict__
            own = _OWN_HINTS[base] = {
                name: eval(value, scope, dict(vars(base))) if isinstance(value, str) else value
                for name, value in base.__dict__.get("__annotations__", {}).items()}
        hints.update(own)
    return hints


def event(kind: str):
    """Declare a class as the record of one ledger event kind."""
    def register(cls):
        if cls.__doc__ is None:  # else dataclass() builds one from inspect.signature
            cls.__doc__ = f"The {kind!r} ledger event."
        cls = dataclass(frozen=True, kw_only=True, eq=False, repr=False)(cls)
        hints = _field_hints(cls)
        cls.KIND = kind
        cls._FIELDS = tuple(f.name for f in fields(cls))
        cls.SPECS = tuple(_spec_of(f.name, hints[f.name], f) for f in fields(cls)
                          if f.name not in ("seq", "t"))
        cls._CHECKS = _check_rows(COMMON + cls.SPECS)
        cls._OPTIONAL = tuple(f.name for f in fields(cls) if f.default is ABSENT)
        cls._CONVERTS = tuple((s.name, s.convert) for s in cls.SPECS if s.convert is not None)
        cls._NAMES = frozenset(s.name for s in cls.SPECS) | {"seq", "t"}
        EVENT_TYPES[kind] = cls
        return cls
    return register


# -- the campaign and its window --------------------------------------------------------
@event("campaign_started")
class CampaignStarted(Event):
    plan_sha256: str | None = opt()
    frozen_plan: str | None = opt(null=False)
    tool_version: str | None = opt(null=False)

    def describe(self) -> str:
        return "campaign started (plan frozen in .itera/plan.toml)"


@event("window_started")
class WindowStarted(Event):
    start: Time
    end: Time
    hours: float

    def describe(self) -> str:
        stamp = "%Y-%m-%d %H:%M"  # a 3-day window needs the date, not only the time
        return (f"rental window: {time.strftime(stamp, time.localtime(self.start))} to "
                f"{time.strftime(stamp, time.localtime(self.end))} "
                f"({human_hours(self.hours)})")


@event("engine_started")
class EngineStarted(Event):
    pid: Pid | None = opt(null=False)
    host: str | None = opt(null=False)  # the box's name


@event("engine_stopped")
class EngineStopped(Event):
    pid: Pid | None = opt(null=False)


@event("engine_restarted")
class EngineRestarted(Event):
    """The supervisor started the engine again after it died (kill -9, OOM): why, how often."""
    pid: Pid | None = opt(null=False)
    reason: str
    restarts: int

    def describe(self) -> str:
        return (f"engine restarted after it died ({self.reason}; restart "
                f"{self.restarts}): runs reattached from the ledger")


# -- runs -------------------------------------------------------------------------------
@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # Event's: see there
class _LaunchHead(Event):
    pid: Pid | None = opt()
    pid_start: Time | None = opt()
    note: str | None = opt()  # a launch found after a restart says how


@dataclass(frozen=True, kw_only=True, eq=False, repr=False)  # Event's: see there
class _RunFields(Event):
    run: str
    target: str
    kind: RunKind
    category: str
    attempt: int
    config_hash: str
    config: Config | None = opt(null=False)
    lanes: tuple[str, ...] | None = opt(null=False)
    devices: str | None = opt(null=False)
    lot: str | None = opt()
    max_steps: int | None = opt()
    # a run continuing one its box cut (tui.engine.moves): which, from what, and why
    resumes: str | None = opt()
    resume_from: str | None = opt()
    resume_reason: str | None = opt()
    # whose checkpoint resume_from is, when not the run it continues: an earlier attempt's
    # newer one (a second move whose cut attempt stored none; tui.engine.scheduler)
    resume_run: str | None = opt()
    # a run relaunched after a hiccup (`[retry]`, tui.engine.retry): which retry it is
    retry: int | None = opt()


@event("run_launch_intent")
class RunLaunchIntent(_RunFields):
    """Recorded before the process starts: a crash after it leaves nothing unaccounted."""


@event("run_launched")
class RunLaunched(_RunFields, _LaunchHead):
    def describe(self) -> str:
        where = f"lanes {','.join(self.lanes or ()) or '-'}, CUDA_VISIBLE_DEVICES=" \
                f"{self.devices or '(none)'}"
        steps = f", max {self.max_steps} steps" if self.max_steps else ""
        if self.resumes and self.retry:
            steps += f"; {self.resume_reason}"
        elif self.resumes:
            source = f"{self.resume_run}/{self.resume_from}" if self.resume_run \
                else self.resume_from
            steps += (f"; continues {self.resumes} from {source}" if self.resume_from
                      else f"; relaunches {self.resumes}: {self.resume_reason}")
        return f"launched {self.run} ({self.kind}, {self.category}, {where}{steps})"



@event("run_skipped")
class RunSkipped(Event):
    target: str
    kind: RunKind
    category: str | None = opt(null=False)
    reason: str | None = opt()

    def describe(self) -> str:
        return f"skipped {self.target} ({self.kind}): {self.reason}"


@event("run_exited")
class RunExited(Event):
    run: str
    exit_code: int | None = opt()
    note: str | None = opt()
    duration_s: float | None = opt()
    # the readout the engine folded of every record it read (conclusion.outcome)
    final_metric: float | None = opt()
    non_finite: str | None = opt()
    delivered_path: str | None = opt()
    delivered_step: int | None = opt()
    delivered_metric: str | None = opt()
    delivered_value: float | None = opt()
    read_whole: bool | None = opt(null=False)
    unread_bytes: int | None = opt(null=False)
    stopped_by: str | None = opt()  # who asked it to stop, if any
    signaled: bool | None = opt(null=False)  # its launcher saw SIGTERM (exit.json)
    # `[retry]` (tui.engine.retry): a hiccup, relaunched ("retry 1 of 2 after exit -9 ...")
    retried: str | None = opt()
    not_retried: str | None = opt()  # a hiccup left failed, and why (window, none left)

    def describe(self) -> str:
        if self.retried:
            return f"exited {self.run} with status {self.exit_code}: {self.retried} follows"
        if self.not_retried:
            return (f"exited {self.run} with status {self.exit_code}: not retried "
                    f"({self.not_retried})")
        note = f"; {self.note}" if self.note else ""
        if self.stopped_by == "wrapup":  # it ended because the wrap-up asked, not on its own
            return f"stopped {self.run} for the wrap-up (exit status {self.exit_code}{note})"
        if self.stopped_by:
            return (f"stopped {self.run} (asked by {self.stopped_by}; exit status "
                    f"{self.exit_code}{note})")
        note = f" ({self.note})" if self.note else ""
        return f"exited {self.run} with status {self.exit_code}{note}"


@event("run_progress")
class RunProgress(Event):
    """How far a run's own records had gone: the step of its first record (once, with
    the first) and the newest step it had reached (at most every PROGRESS_EVERY_S, and
    once more before it exits). What a run whose box died without a word had done is
    known from these on the next box: the work a continuation redid is counted from
    them (`tui.engine.lost_work`)."""
    run: str
    step: int  # the newest global step its records reached
    first_step: int | None = opt()  # the global step of its first record (first one only)

    def describe(self) -> str | None:
        return None  # bookkeeping every few minutes: the views say what it means (lost_work)


@event("run_reattached")
class RunReattached(Event):
    run: str
    pid: Pid | None = opt()

    def describe(self) -> str:
        return f"reattached to {self.run} (pid {self.pid})"


@event("run_killed")
class RunKilled(Event):
    run: str
    signal: str | None = opt(null=False)
    after_s: float | None = opt()

    def describe(self) -> str:
        return f"SIGKILL to {self.run} after {self.after_s} s grace"


@event("run_terminated")
class RunTerminated(Event):
    run: str
    signal: str | None = opt(null=False)

    def describe(self) -> str:
        return f"SIGTERM to {self.run} (the stop request was not honoured in time)"


@event("run_launch_failed")
class RunLaunchFailed(Event):
    run: str
    error: str | None = opt(null=False)


@event("run_launch_abandoned")
class RunLaunchAbandoned(Event):
    run: str
    reason: str | None = opt(null=False)


@event("stop_rule_fired")
class StopRuleFired(Event):
    run: str
    rule: str
    reason: str
    value: Scalar | None = opt()
    step: Number | None = opt()
    record_t: Number | None = opt()  # the time of the record that fired it

    def describe(self) -> str:
        return f"STOP {self.run}: {rule_label(self.rule)} — {self.reason}"


@event("run_stop_requested")
class RunStopRequested(Event):
    run: str
    by: str
    reason: str | None = opt()
    signal: str | None = opt(null=False)
    deadline: Time | None = opt()  # SIGKILL from here; the grace counts from `t`
    term_at: Time | None = opt()  # an older engine's SIGTERM put off by a grace
    step: Number | None = opt()

    @classmethod
    def with_grace(cls, grace_s: float, **fields) -> "RunStopRequested":
        """A stop whose SIGKILL deadline is `grace_s` after the ledger's own stamp of this
        event, not after the tick that asked for it: the grace never loses the time the
        tick took before the request was written."""
        ev = cls(**fields)
        object.__setattr__(ev, "_grace_s", float(grace_s))
        return ev

    def stamped(self, seq: int, t: float) -> "RunStopRequested":
        grace = self.__dict__.get("_grace_s")
        if grace is None:
            return super().stamped(seq, t)
        return self._with(seq=seq, t=t, deadline=t + grace, _omitted=self._omitted - {"deadline"})

    def describe(self) -> str:
        if self.signal == "none":
            return f"stop requested of {self.run} ({self.by}: {self.reason})"
        return f"SIGTERM to {self.run} ({self.by}: {self.reason})"


@event("run_leftovers")
class RunLeftovers(Event):
    """Processes that outlived their run (own session, ignored SIGTERM): named, then ended."""
    run: str
    signal: str | None = opt(null=False)
    grace_s: float | None = opt()
    processes: Processes

    def describe(self) -> str:
        return (f"{self.run} left processes behind: {_named(self.processes)}; SIGTERM now, "
                f"SIGKILL after {self.grace_s} s")


@event("run_leftovers_killed")
class RunLeftoversKilled(Event):
    run: str
    signal: str | None = opt(null=False)
    processes: Processes

    def describe(self) -> str:
        return f"SIGKILL to what {self.run} left behind: {_named(self.processes)}"


# -- checkpoints ------------------------------------------------------------------------
@event("checkpoint_requested")
class CheckpointRequested(Event):
    run: str
    request_seq: int | None = opt(null=False)
    by: str | None = opt(null=False)

    def describe(self) -> str:
        return f"checkpoint requested for {self.run} ({self.by})"


@event("checkpoint_acknowledged")
class CheckpointAcknowledged(Event):
    run: str
    path: str | None = opt()
    sha256: str | None = opt()
    digest: str | None = opt()
    bytes: int | None = opt()
    write_s: float | None = opt()
    block_s: float | None = opt()
    step: Number | None = opt()
    mode: str | None = opt()
    held: str | None = opt()  # the engine's own copy, the one verified and stored
    # a watched file that names no step (nanoGPT's ckpt.pt): the step of the run's last
    # record written before the file's mtime, an estimate from the records; the step it
    # holds is read by its verifier (tui.engine.checkpoints.watched)
    step_by_time: int | None = opt()

    def describe(self) -> str:
        size = (self.bytes or 0) / 1e6
        step = f"at step {self.step}" if self.step is not None else (
            f"at about step {self.step_by_time} (by its records; its own step is read when "
            "it verifies)" if self.step_by_time is not None
            else "(its step is known after verification)")
        return (f"checkpoint written by {self.run} {step}: {size:.1f} MB in "
                f"{self.write_s or 0:.2f} s")


@event("checkpoint_verification_started")
class CheckpointVerificationStarted(Event):
    run: str
    path: str
    attempt: int | None = opt(null=False)
    pid: Pid | None = opt(null=False)


@event("checkpoint_verified")
class CheckpointVerified(Event):
    run: str
    path: str | None = opt()
    ok: bool
    problem: str | None = opt()
    step: Number | None = opt()
    sha256: str | None = opt()  # of the bytes the verifier read (a folder: its tree digest)
    held: str | None = opt()  # the engine's copy it read, kept for the store and the bundle

    def describe(self) -> str:
        verdict = "verified" if self.ok else f"FAILED verification: {self.problem}"
        return f"checkpoint of {self.run} {verdict} ({self.path})"


@event("checkpoint_rotated")
class CheckpointRotated(Event):
    """The trainer itself removed a checkpoint (HF save_total_limit)."""
    run: str
    path: str
    step: Number | None = opt()
    verified: bool | None = opt()  # None: removed before it could be read

    def describe(self) -> str:
        when = {True: "after it was verified", False: "after it FAILED verification",
                None: "before it could be read (not a verification failure)"}[self.verified]
        step = f" at step {self.step}" if self.step is not None else ""
        return (f"checkpoint of {self.run}{step} rotated away by the trainer {when} "
                f"({self.path})")


@event("resume_check_result")
class ResumeCheckResult(Event):
    run: str
    ok: bool | None = opt()
    steps_compared: int | None = opt()
    max_abs_diff: Number | None = opt()
    problem: str | None = opt()

    def describe(self) -> str:
        verdict = f"resume check {'passed' if self.ok else 'FAILED'} for {self.run}"
        if not self.steps_compared and self.problem:  # it failed before comparing a loss
            return f"{verdict}: {self.problem}"
        return f"{verdict} ({self.steps_compared} steps compared, max diff {self.max_abs_diff})"


# -- the decision point and the queue ---------------------------------------------------
@event("decision_pending")
class DecisionAsked(Event):
    """The pilot is done: the queue waits for a decision (by `deadline`, the default)."""
    pilot: PilotFigures | None = opt(null=False)
    deadline: Time | None = opt()
    default: Annotated[str, one_of(*DECISION_DEFAULTS)] | None = opt()
    auto: str | None = opt()

    def describe(self) -> str:
        line = "decision point: the pilot is done, the queue waits for a decision"
        if self.deadline is not None:
            line += (f"; with no answer by {clock_text(self.deadline)} the engine takes "
                     f"the default ({self.default})")
        return line


@event("decision_taken")
class DecisionTaken(Event):
    decision: DecisionKind
    drop: tuple[str, ...] | None = opt(null=False)
    by: DecidedBy | None = opt()
    note: str | None = opt()

    def describe(self) -> str:
        drop = f" {','.join(self.drop)}" if self.drop else ""
        return f"decision: {self.decision}{drop} (by {decided_by_words(self.by)})"


@event("variant_dropped")
class VariantDropped(Event):
    variant: str
    reason: str | None = opt()

    @property
    def reason_text(self) -> str | None:
        """Its reason as a person reads it: a drop the decision made says who decided in
        words (the line keeps the ledger's value: `decision by cli` is the flag)."""
        by = (self.reason or "").removeprefix(DROPPED_BY_DECISION)
        if by == (self.reason or ""):
            return self.reason
        return f"{DROPPED_BY_DECISION}{decided_by_words(by)}"

    def describe(self) -> str:
        return f"dropped variant {self.variant} ({self.reason_text})"


@event("queue_paused")
class QueuePaused(Event):
    def describe(self) -> str:
        return "queue paused"



@event("queue_resumed")
class QueueResumed(Event):
    def describe(self) -> str:
        return "queue resumed"



# -- words for a person -----------------------------------------------------------------
@event("warning")
class WarningEvent(Event):
    run: str | None = opt()
    skipped_bytes: int | None = opt(null=False)  # a run writing faster than it is read
    backlog_bytes: int | None = opt(null=False)
    message: str

    def describe(self) -> str:
        return f"warning: {self.message}"


@event("notice_sent")
class NoticeSent(Event):
    """A once-per-campaign notice (the window's): never sent twice after a restart."""
    kind: str


@event("clock_stepped")
class ClockStepped(Event):
    """The wall clock moved by more than a tick could explain (an NTP step, a suspend)."""
    by_s: float
    wall_before: Time | None = opt(null=False)
    note: str | None = opt(null=False)

    def describe(self) -> str:
        by = self.by_s or 0
        return (f"the wall clock stepped {'forward' if by > 0 else 'back'} by "
                f"{human_duration(abs(by))} (runs are timed on the monotonic clock: none is "
                f"stopped for it)")


# -- the box's end and the move to another ----------------------------------------------
@event("box_going_down")
class BoxGoingDown(Event):
    """The system announced the box's end (SIGTERM, a provider's notice): every live run
    is asked for a checkpoint, the engine waits `grace_s` and goes."""
    signal: str
    grace_s: float
    runs: tuple[str, ...]
    host: str | None = opt()
    notice: str | None = opt()

    def describe(self) -> str:
        runs = ", ".join(self.runs) or "no live run"
        why = self.notice or f"{self.signal} from the system"
        return (f"BOX GOING DOWN ({why}): checkpoint asked of {runs}; the engine waits "
                f"{self.grace_s:g} s for them, then goes")


@event("box_checkpointed")
class BoxCheckpointed(Event):
    """What the box-down grace saved: run -> its last verified checkpoint, and runs without."""
    saved: StrMap
    unsaved: tuple[str, ...]
    waited_s: float | None = opt(null=False)

    def describe(self) -> str:
        saved = ", ".join(f"{r} ({p})" for r, p in self.saved.items()) or "none"
        unsaved = ", ".join(self.unsaved)
        return (f"box going down: verified checkpoints kept for {saved}"
                + (f"; none for {unsaved} (they start over on the next box)" if unsaved else ""))


@event("campaign_moved")
class CampaignMoved(Event):
    """`itera-tui resume URL`: the campaign continues on another box (the one plan change)."""
    store: str
    from_host: str | None = opt()
    host: str | None = opt()
    cut: tuple[str, ...]
    last_t: Time | None = opt()
    window_hours: float
    price_usd: float
    lot: str | None = opt()
    checkpoints: StrMap | None = opt(null=False)  # run -> the checkpoint fetched for it

    def describe(self) -> str:
        cut = ", ".join(self.cut) or "none"
        return (f"campaign moved to {self.host or 'this box'} from "
                f"{self.from_host or 'the old box'} (resumed from {self.store}); "
                f"runs cut: {cut}; the new box is "
                f"{lot_text(self.lot, self.window_hours, self.price_usd)}")


# -- the end ----------------------------------------------------------------------------
@event("wrapup_started")
class WrapupStarted(Event):
    def describe(self) -> str:
        return "wrap-up started"



@event("wrapup_done")
class WrapupDone(Event):
    bundle: str | None = opt()
    verified: bool | None = opt(null=False)
    failures: int | None = opt(null=False)
    bytes: int | None = opt()
    unverified: StrMap | None = opt(null=False)

    def describe(self) -> str:
        state = "verified" if self.verified else f"NOT verified ({self.failures} failures)"
        return f"bundle {state}: {self.bundle}"


# -- the off-box store (tui.store) ------------------------------------------------------
@event("store_object")
class StoreObject(Event):
    """One object stored whole, with its sha256."""
    kind: str
    key: str
    bytes: int
    sha256: str
    run: str | None = opt()

    def describe(self) -> str:
        return (f"stored off the box: {self.key} ({self.kind}, {self.bytes} "
                f"bytes, sha256 {self.sha256[:12]}…)")


@event("store_down")
class StoreDown(Event):
    url: str
    message: str

    def describe(self) -> str:
        return (f"warning: the store {self.url} does not answer ({self.message}); "
                "the runs go on, the mirror retries and catches up")


@event("store_at_risk")
class StoreAtRisk(Event):
    message: str

    def describe(self) -> str:
        return f"warning: the bundle's delivery is at risk: {self.message}"


@event("store_up")
class StoreUp(Event):
    url: str
    down_s: float | None = opt()
    stored: int | None = opt()

    def describe(self) -> str:
        return (f"the store {self.url} answers again"
                + (f" after {human_duration(self.down_s)}" if self.down_s is not None else "")
                + ": the mirror catches up")


@event("store_delivered")
class StoreDelivered(Event):
    url: str
    verified: bool
    files: int
    bytes: int
    seconds: float | None = opt()
    problems: tuple[str, ...] | None = opt(null=False)

    def describe(self) -> str:
        if self.verified:
            return (f"bundle delivered to {self.url} and verified there "
                    f"({self.files} files, {self.bytes} bytes)")
        failed = "; ".join((self.problems or ())[:3])
        return f"bundle delivered to {self.url} but NOT verified there: {failed}"


# Losing one of these would make a restart relaunch a run, reset the rental window,
# start the campaign over or change what the decision allowed: the engine refuses to
# guess (see tui.engine.ledger.damage).
CRITICAL = {
    CampaignStarted: "the campaign would start over",
    WindowStarted: "the rental window would be reset",
    RunLaunched: "that run would be launched again into its old directory",
    DecisionTaken: "the decision would be taken again",
    VariantDropped: "a dropped variant could be launched",
}
CRITICAL_KINDS = {cls.KIND: why for cls, why in CRITICAL.items()}

_ABSENT_MARK = object()


def problem_of(record: dict) -> str | None:
    """Why a ledger line's object cannot be replayed (the first problem), or None."""
    kind = record.get("event")
    cls = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    get = record.get
    for name, accepts, required, nullable, field_kind in (
            cls._CHECKS if cls is not None else _COMMON_CHECKS):
        value = get(name, _ABSENT_MARK)
        if value is _ABSENT_MARK:
            if required:
                return f"field {name!r} is missing"
        elif not (nullable if value is None else accepts(value)):
            return f"field {name!r} must be {field_kind.what}, got {shown(value)}"
    return None


def from_record(record: dict) -> Event:
    """The event a checked line's object holds (call `problem_of` first); a kind this
    release does not know is an UnknownEvent carrying its fields."""
    kind = record["event"]
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        ev = UnknownEvent(seq=record["seq"], t=record["t"], name=kind)
        object.__setattr__(ev, "_extra", {k: v for k, v in record.items()
                                          if k not in ("seq", "t", "event")})
        return ev
    names = cls._NAMES
    ev = cls(**{k: v for k, v in record.items() if k in names})
    extra = {k: v for k, v in record.items() if k not in names and k != "event"}
    if extra:
        object.__setattr__(ev, "_extra", extra)
    return ev


def parse(record: dict) -> Event:
    """A JSON object from outside (a test's, the wire's) as an event; ValueError if it
    is not one a ledger would hold."""
    problem = problem_of(record)
    if problem is not None:
        raise ValueError(f"not a ledger event: {problem}")
    return from_record(record)


def shapes_digest() -> str:
    """A digest of every kind's fields as the ledger checks them: the wire's protocol
    version is tied to it (tui.service.protocol), so an event whose fields change
    cannot cross between an engine and a client of different releases unnoticed."""
    import hashlib

    shapes = [[kind, [[s.name, s.kind.what, s.required, s.nullable] for s in cls.SPECS]]
              for kind, cls in sorted(EVENT_TYPES.items())]
    return hashlib.sha256(repr(shapes).encode()).hexdigest()[:16]


def field_names(kind: str) -> tuple[str, ...]:
    """The fields a kind's line may carry besides seq, t and event, in written order."""
    return tuple(s.name for s in EVENT_TYPES[kind].SPECS)
