"""The engine's wire protocol: JSON lines over a Unix socket or an ssh pipe.

One home for what a client may say and what the engine answers (the protocol
table of docs/processes.md is this module in words). Every message is one JSON object on
one line. A client's line is at most `MAX_REQUEST_BYTES`; anything that is
not a known request with well-typed fields is answered with an `error` and
changes nothing. No field of a request ever reaches a shell: actions are
looked up in `ActionKind` and their arguments checked here, by type and size,
before the engine sees them.

    client -> engine                      engine -> client
    hello {protocol, client}              hello {protocol, engine_pid, campaign,
                                                 plan_toml, seq}
    subscribe {from_seq, snapshots,       event {event}        (every ledger event
               history}                   snapshot {snapshot}   after from_seq, then live)
    action {id, action, args}             result {id, ok, message}
    ping {id}                             result {id, ok: true, message: "pong"}
                                          error {id?, message}  bye {reason}
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

from ..engine.decision.answer import Decision
from ..engine.errors import EngineError

PROTOCOL_VERSION = 4
# the ledger event shapes each version carries (tui.engine.ledger.events.shapes_digest):
# an event whose fields change needs a new version here, or tests/test_service_wire fails
EVENT_SHAPES_BY_VERSION = {2: "4bb460d2a19ea8fa",
                           3: "5ceab689ca7d93ca",  # decision_taken's `by`: DecidedBy
                           4: "9ea4e1c2839fef73"}  # [retry]: a launch's `retry`, run_exited's
#   `retried` / `not_retried`; checkpoint_verified's `sha256` (what the verifier read) and `held`;
#   run_progress (how far a run's records went: the work a lost box redid); a launch's
#   `resume_run` (whose checkpoint it resumes from: an earlier attempt's, after a second move);
#   checkpoint_acknowledged's `step_by_time` (a stepless watched file's step by the records)
MAX_REQUEST_BYTES = 64 * 1024
MAX_TEXT = 2000  # a stop reason, a decision
MAX_IDS = 200


class ProtocolError(ValueError):
    """A message the other side cannot act on; the text is sent back as the error."""


class ActionKind(str, enum.Enum):
    CHECKPOINT = "checkpoint"
    STOP = "stop"
    DROP = "drop"
    DECIDE = "decide"
    PAUSE = "pause"
    WRAPUP = "wrapup"
    SHUTDOWN = "shutdown"  # stop the engine on purpose (the runs are left alone)


@dataclass(frozen=True)
class Hello:
    protocol: int
    client: str


@dataclass(frozen=True)
class Subscribe:
    from_seq: int | None  # events after this seq; None: only what comes from now on
    snapshots: bool
    history: int  # with from_seq None: the last N events first (the events panel)


@dataclass(frozen=True)
class Action:
    id: int
    kind: ActionKind
    run: str | None = None
    reason: str | None = None
    variants: tuple[str, ...] = ()
    at_decision: bool = False
    decision: Decision | None = None
    paused: bool | None = None


@dataclass(frozen=True)
class Ping:
    id: int


Request = Hello | Subscribe | Action | Ping


@dataclass(frozen=True)
class Reply:
    """An action's answer on the wire: the engine's `ActionResult`, with its request id."""
    id: int | None
    ok: bool
    message: str


def encode(message: dict) -> bytes:
    return (json.dumps(message, separators=(",", ":"), allow_nan=False) + "\n").encode()


def _int(obj: dict, key: str, *, optional: bool = False, lo: int = 0,
         hi: int = 2 ** 62) -> int | None:
    value = obj.get(key)
    if value is None and optional:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ProtocolError(f"{key}: expected a whole number in [{lo}, {hi}]")
    return value


def _bool(obj: dict, key: str, default: bool | None = None) -> bool:
    value = obj.get(key, default)
    if not isinstance(value, bool):
        raise ProtocolError(f"{key}: expected true or false")
    return value


def _text(obj: dict, key: str, limit: int = MAX_TEXT) -> str:
    value = obj.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ProtocolError(f"{key}: expected a non-empty string")
    if len(value) > limit:
        raise ProtocolError(f"{key}: longer than {limit} characters")
    return value


def _ids(obj: dict, key: str) -> tuple[str, ...]:
    value = obj.get(key)
    if not isinstance(value, list) or not 0 < len(value) <= MAX_IDS:
        raise ProtocolError(f"{key}: expected a list of 1 to {MAX_IDS} ids")
    return tuple(_text({"id": v}, "id", 200) for v in value)


def parse_request(line: bytes) -> Request:
    """One client line as a typed request; ProtocolError (with the reason) otherwise."""
    if len(line) > MAX_REQUEST_BYTES:
        raise ProtocolError(f"message longer than {MAX_REQUEST_BYTES} bytes")
    try:
        obj = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        raise ProtocolError("not a JSON object") from None
    if not isinstance(obj, dict):
        raise ProtocolError("not a JSON object")
    op = obj.get("op")
    if op == "hello":
        return Hello(_int(obj, "protocol"), str(obj.get("client", "?"))[:40])
    if op == "subscribe":
        return Subscribe(_int(obj, "from_seq", optional=True),
                         _bool(obj, "snapshots", True),
                         _int(obj, "history", optional=True, hi=100_000) or 0)
    if op == "ping":
        return Ping(_int(obj, "id"))
    if op != "action":
        raise ProtocolError(f"unknown op {str(op)[:40]!r}")
    rid = _int(obj, "id")
    try:
        kind = ActionKind(obj.get("action"))
    except ValueError:
        raise ProtocolError(f"unknown action {str(obj.get('action'))[:40]!r}; known: "
                            + ", ".join(k.value for k in ActionKind)) from None
    args = obj.get("args", {})
    if not isinstance(args, dict):
        raise ProtocolError("args: expected an object")
    if kind is ActionKind.CHECKPOINT:
        return Action(rid, kind, run=_text(args, "run", 200))
    if kind is ActionKind.STOP:
        return Action(rid, kind, run=_text(args, "run", 200), reason=_text(args, "reason"))
    if kind is ActionKind.DROP:
        return Action(rid, kind, variants=_ids(args, "variants"),
                      at_decision=_bool(args, "at_decision", False))
    if kind is ActionKind.DECIDE:
        try:
            decision = Decision.parse(_text(args, "decision"))
        except EngineError as exc:
            raise ProtocolError(f"decision: {exc}") from None
        return Action(rid, kind, decision=decision)
    if kind is ActionKind.PAUSE:
        return Action(rid, kind, paused=_bool(args, "paused"))
    return Action(rid, kind)


def action_message(rid: int, kind: ActionKind, **args) -> dict:
    """A client's action request, as `parse_request` reads it."""
    return {"op": "action", "id": rid, "action": kind.value,
            "args": {k: v for k, v in args.items() if v is not None}}


def event_message(ev) -> bytes:
    """A ledger event on the wire: the object of its ledger line (`Event.to_record`),
    read back on the other side by the same checks as a line (`events.parse`). Written
    as the ledger writes it, non-finite numbers included: a pilot stopped on an inf loss
    carries `"last_loss": Infinity` in its figures, and that is the fact to show."""
    message = {"op": "event", "event": ev.to_record()}
    return (json.dumps(message, separators=(",", ":"), allow_nan=True) + "\n").encode()
