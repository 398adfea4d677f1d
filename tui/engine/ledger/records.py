"""The small frozen records the replayed state is made of.

A stop, a stop request, a checkpoint acknowledgement, a verification, a
resume check, a decision and the wrap-up each have one declared shape here,
built from their ledger event in one place, so readers use attributes instead
of `.get("reason")` guesses spread over the code. `to_dict()` gives the JSON
form that `status --json` and the bundle print.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from ...campaign.numbers import is_finite_number
from ...campaign.text import for_terminal
from ..conclusion.delivered import DeliveredModel  # stdlib-only: its one home
from .events import (BoxGoingDown, CampaignMoved, CheckpointAcknowledged, CheckpointVerified,
                     ResumeCheckResult, RunExited, RunStopRequested, StopRuleFired,
                     decided_by_words)


@dataclass(frozen=True)
class Readout:
    """What a run's records say about it once it has ended (folded by
    `conclusion.outcome.ReadoutFold`; the live engine's fold rides on `run_exited`)."""

    final_metric: float | None  # the last finite value of the decision metric
    non_finite: str | None  # why its numbers cannot be accepted, if they cannot
    unread_bytes: int = 0  # output the engine skipped to keep up: never folded, never ruled
    # the checkpoint training reloaded at its end (HF load_best_model_at_end): then
    # `final_metric` is that model's figure (conclusion/delivered.py)
    delivered: DeliveredModel | None = None

    @classmethod
    def from_event(cls, ev: RunExited) -> "Readout | None":
        """The readout a `run_exited` carries, or None (a ledger from before the fold)."""
        if ev.read_whole is None:
            return None
        return cls(_opt_float(ev.final_metric), ev.non_finite, ev.unread_bytes or 0,
                   DeliveredModel.from_fields(ev))


def _opt_float(value) -> float | None:
    return float(value) if is_finite_number(value) else None


def _opt_int(value) -> int | None:
    return int(value) if is_finite_number(value) and float(value).is_integer() else None



def opt_text(value) -> str | None:
    """A reason or a problem a run may control, as every view shows it: cleaned for a
    terminal (for_terminal) once, here, where it leaves the ledger. Paths stay raw."""
    return None if value is None else for_terminal(value)


@dataclass(frozen=True)
class StopRecord:
    """Why a run was stopped: a rule that fired, a person, the wrap-up or the pilot bound."""

    rule: str
    reason: str | None
    value: float | str | None
    step: int | None
    t: float

    @classmethod
    def from_event(cls, ev: StopRuleFired | RunStopRequested,
                   rule: str | None = None) -> "StopRecord":
        """A rule's stop, or a person's (`rule`: who, from a stop request)."""
        value = getattr(ev, "value", None)
        if not (is_finite_number(value) or isinstance(value, str)):
            value = None
        return cls(rule or str(ev.rule), opt_text(ev.reason), value, _opt_int(ev.step),
                   _opt_float(ev.t) or 0.0)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class StopRequest:
    """A stop on its way: SIGTERM now (or at `term_at`, for a graceful pilot bound),
    SIGKILL at `deadline`."""

    by: str | None
    reason: str | None
    t: float
    deadline: float | None
    killed: bool = False
    term_at: float | None = None
    termed: bool = True


@dataclass(frozen=True)
class CheckpointAck:
    """A checkpoint the run (SDK, a framework callback, or a watched file) says it wrote."""

    path: str | None
    sha256: str | None  # only when the run's integrity digest is sha256
    bytes: int | None
    write_s: float | None
    block_s: float | None
    step: int | None
    mode: str | None
    t: float
    digest: str | None = None  # "algo:hex" (xxh3_128 or sha256), as the SDK wrote it
    held: str | None = None  # the engine's copy until verified (tui.campaign.held)
    step_by_time: int | None = None  # a stepless watched file: its step by the records

    @classmethod
    def from_event(cls, ev: CheckpointAcknowledged) -> "CheckpointAck":
        return cls(ev.path, ev.sha256, ev.bytes, _opt_float(ev.write_s),
                   _opt_float(ev.block_s), _opt_int(ev.step), ev.mode, float(ev.t), ev.digest,
                   ev.held, _opt_int(ev.step_by_time))

    def step_text(self) -> str:
        """Its step as every view says it: the step it holds (named, or read by its
        verifier), else, before the verdict, the records' estimate marked as one."""
        if self.step is not None:
            return f"step {self.step}"
        if self.step_by_time is not None:
            return f"about step {self.step_by_time} (by its records)"
        return "step known after verification"

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Verification:
    """The verdict of a fresh process that loaded an acknowledged checkpoint."""

    path: str | None
    ok: bool
    problem: str | None
    step: int | None
    t: float
    sha256: str | None = None  # what the verifier read (None in ledgers before it was said)
    held: str | None = None  # the engine's copy it read, while kept (tui.campaign.held)

    @classmethod
    def from_event(cls, ev: CheckpointVerified) -> "Verification":
        return cls(ev.path, ev.ok is True, opt_text(ev.problem), _opt_int(ev.step),
                   float(ev.t), ev.sha256, ev.held)

    def to_dict(self) -> dict:
        # the digest and the copy only where a ledger says them: what `status --json`
        # printed for older ledgers stays as it was
        return {k: v for k, v in asdict(self).items()
                if v is not None or k not in ("sha256", "held")}


@dataclass(frozen=True)
class ResumeCheck:
    """The resume check's outcome, as the `resume` stop rule and the report read it."""
    ok: bool
    steps_compared: int | None
    max_abs_diff: float | None
    problem: str | None

    @classmethod
    def from_event(cls, ev: ResumeCheckResult) -> "ResumeCheck":
        return cls(ev.ok is True, ev.steps_compared, _opt_float(ev.max_abs_diff),
                   opt_text(ev.problem))


@dataclass(frozen=True)
class TakenDecision:
    """What was decided at the decision point, by whom."""

    t: float
    decision: str  # continue | drop | wrapup
    drop: tuple[str, ...] = ()
    by: str | None = None
    note: str | None = None
    pending_t: float | None = None  # when the decision point opened (the wait began)

    @property
    def waited_s(self) -> float | None:
        """How long the queue waited for this decision (the GPUs idle meanwhile)."""
        return None if self.pending_t is None else max(0.0, self.t - self.pending_t)

    @property
    def text(self) -> str:
        """The one wording of a decision every view uses."""
        if self.decision == "drop":
            return "drop " + ",".join(self.drop)
        return "wrap up" if self.decision == "wrapup" else self.decision

    @property
    def said(self) -> str:
        """`drop b (by a person, in the room)`: what, and who decided it, in words."""
        return f"{self.text} (by {decided_by_words(self.by)})"

    def to_dict(self) -> dict:
        return asdict(self) | {"drop": list(self.drop)}


@dataclass(frozen=True)
class DecisionPending:
    """The decision point is open: the pilots' figures a person decides on."""
    t: float
    pilot: dict = field(default_factory=dict, compare=False)  # variant -> pilot figures
    deadline: float | None = None  # when the engine takes `default` if nobody answered
    default: str | None = None  # continue | wrapup | drop-stopped
    auto: str | None = None  # a decision already given (config, --decide): nobody waited


@dataclass(frozen=True)
class WrapupStatus:
    """Where the wrap-up stands: started, done (verified or not) or failed."""
    state: str  # started | done | failed
    t: float
    started_t: float | None = None
    bundle: str | None = None
    verified: bool | None = None
    failures: int = 0
    bytes: int | None = None
    unverified: tuple[tuple[str, str], ...] = ()  # (run id, deliverable failure)

    def to_dict(self) -> dict:
        return asdict(self)

    def line(self) -> str:
        """The bundle as every ending names it (`status`, the headless ending)."""
        if self.state == "started":
            return "bundle: being built (the wrap-up is under way)"
        if not self.bundle:
            return "bundle: none (the wrap-up failed; `itera-tui wrapup` tries again)"
        return bundle_line(self.bundle, self.verified is True, self.failures)  # failed:
        # built, NOT verified


def bundle_line(bundle: str, verified: bool, failures: int | None = None) -> str:
    """`bundle: outputs/bundle (verified)`, or what failed and the command that names it."""
    if verified:
        return f"bundle: {bundle} (verified)"
    count = f": {failures} failure{'s' if failures != 1 else ''}" if failures else ""
    return f"bundle: {bundle} (NOT verified{count}; `itera-tui verify {bundle}` names them)"


@dataclass(frozen=True)
class WarningRecord:
    """A warning the ledger holds (a GPU idle under a live run, a full disk)."""
    t: float
    message: str


@dataclass(frozen=True)
class BoxDown:
    """The box announced its end (a system SIGTERM, a preemption notice): the runs that
    were live then, and, once the grace is over, which left a verified checkpoint."""

    t: float
    signal: str
    grace_s: float
    runs: tuple[str, ...]
    host: str | None = None
    notice: str | None = None
    saved: tuple[tuple[str, str], ...] = ()  # (run, checkpoint path) kept for a resume
    unsaved: tuple[str, ...] = ()

    @classmethod
    def from_event(cls, ev: BoxGoingDown) -> "BoxDown":
        return cls(float(ev.t), ev.signal, float(ev.grace_s), tuple(ev.runs), ev.host,
                   opt_text(ev.notice))

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Move:
    """The campaign continued on another box (`itera-tui resume URL`): when, from which
    box, which runs the old box cut, and the new box's rental (the one plan change)."""

    t: float
    store: str
    from_host: str | None
    host: str | None
    cut: tuple[str, ...]
    last_t: float | None  # the old box's last ledger event: about when it went away
    window_hours: float
    price_usd: float
    lot: str | None = None

    @classmethod
    def from_event(cls, ev: CampaignMoved) -> "Move":
        return cls(float(ev.t), ev.store, ev.from_host, ev.host, tuple(ev.cut),
                   _opt_float(ev.last_t), float(ev.window_hours), float(ev.price_usd), ev.lot)

    def lot_text(self) -> str:
        """The new box's lot, priced whole: "RTX 4090 lot of 3 d for 47.14 USD"."""
        from ...campaign.units import lot_text

        return lot_text(self.lot, self.window_hours, self.price_usd)

    def to_dict(self) -> dict:
        return asdict(self)
