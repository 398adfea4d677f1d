"""What each ledger event must carry, checked before replay ever sees it.

The state builder reads fields with `ev["start"]` and formats them with
`:g`: an event with a field missing or of the wrong type (a hand edit, a line
from a buggy writer, a bit flip a legacy line cannot detect) would be a
traceback on every restart. So every line is validated here on read, and an
event that fails is *damage* (reported with what it would have said), never a
half-applied event. The schemas list the fields `tui.engine.ledger.state` and the
views read, with the types their producers write (`_record(...)` calls in
`tui/engine/`). Unknown event types pass with the common fields only: a newer
tool's events are history to an older one, not damage. A new event type or
field goes here in the same change that starts writing it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

from ...campaign.loading.sections import DECISION_DEFAULTS  # [pilot] default

RUN_KINDS = ("step", "pilot", "run", "post")
DECISIONS = ("continue", "drop", "wrapup")


@dataclass(frozen=True)
class Kind:
    """A field type: a predicate and the words that name it in a damage report."""

    what: str
    accepts: Callable[[object], bool]
    nullable: bool = False

    def check(self, value) -> bool:
        return (value is None and self.nullable) or (value is not None and self.accepts(value))

    def or_null(self) -> "Kind":
        return Kind(f"{self.what} or null", self.accepts, nullable=True)


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_finite(v) -> bool:
    return _is_number(v) and math.isfinite(v)


def _is_str_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _is_str_map(v) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str)
                                       for k, x in v.items())


def _is_time(v) -> bool:
    """Seconds since 1970 that time.localtime can show (1e300 is finite, not a time)."""
    return _is_finite(v) and 0 <= v < 1e11


def _is_pid(v) -> bool:
    """A process id (0 is no process; tui.engine.runs.processes never signals 0 or 1 either)."""
    return _is_int(v) and 1 <= v <= 2**22  # Linux's PID_MAX_LIMIT


def _is_config(v) -> bool:
    """A run's resolved configuration: the bundle reads its params as a table."""
    return (isinstance(v, dict) and isinstance(v.get("params", {}), dict)
            and _is_str_list(v.get("argv", [])))


def _is_pilot(v) -> bool:
    """The pilot figures the decision screen shows: variant -> {state, stop, step, ...}."""
    def figures(f) -> bool:
        return (isinstance(f, dict) and isinstance(f.get("state", ""), str)
                and isinstance(f.get("stop") or {}, dict)
                and all(f.get(k) is None or _is_number(f.get(k))
                        for k in ("metric", "last_loss", "step")))
    return isinstance(v, dict) and all(figures(f) for f in v.values())


def _one_of(*values: str) -> Kind:
    return Kind("one of " + "|".join(values), lambda v: v in values)


STR = Kind("a string", lambda v: isinstance(v, str))
INT = Kind("an integer", _is_int)
FINITE = Kind("a finite number", _is_finite)
TIME = Kind("a time (seconds since 1970)", _is_time)
PID = Kind("a process id", _is_pid)
CONFIG = Kind("a run configuration (params a table, argv a list of strings)", _is_config)
PILOT = Kind("pilot figures (variant -> figures)", _is_pilot)
NUMBER = Kind("a number", _is_number)  # a rule's step may be a float, even nan
BOOL = Kind("true or false", lambda v: isinstance(v, bool))
STR_LIST = Kind("a list of strings", _is_str_list)
STR_MAP = Kind("a table of strings", _is_str_map)
SCALAR = Kind("a number, string or boolean", lambda v: isinstance(v, (int, float, str)))
PROCESSES = Kind("a list of process records",
                 lambda v: isinstance(v, list) and all(isinstance(p, dict) and _is_pid(p.get("pid"))
                                                       for p in v))

COMMON = {"seq": INT, "t": TIME, "event": STR}

# event -> {field: (kind, required)}; a field absent and not required is fine
_RUN_FIELDS = {"run": (STR, True), "target": (STR, True),
               "kind": (_one_of(*RUN_KINDS), True), "category": (STR, True),
               "attempt": (INT, True), "config_hash": (STR, True),
               "config": (CONFIG, False), "pid": (PID.or_null(), False),
               "pid_start": (TIME.or_null(), False), "lanes": (STR_LIST, False),
               "devices": (STR, False), "lot": (STR.or_null(), False),
               "max_steps": (INT.or_null(), False),
               # a run continuing one its box cut (tui.engine.moves): which, from what
               "resumes": (STR.or_null(), False), "resume_from": (STR.or_null(), False),
               "resume_reason": (STR.or_null(), False)}

SCHEMAS: dict[str, dict[str, tuple[Kind, bool]]] = {
    "campaign_started": {"plan_sha256": (STR.or_null(), False), "frozen_plan": (STR, False),
                         "tool_version": (STR, False)},
    "window_started": {"start": (TIME, True), "end": (TIME, True),
                       "hours": (FINITE, True)},
    "engine_started": {"pid": (PID, False), "host": (STR, False)},  # host: the box's name
    "engine_stopped": {"pid": (PID, False)},
    # the supervisor started the engine again after it died (kill -9, OOM): why, how often
    "engine_restarted": {"pid": (PID, False), "reason": (STR, True), "restarts": (INT, True)},
    "run_launched": _RUN_FIELDS,
    "run_launch_intent": _RUN_FIELDS,  # recorded before the process starts: same fields
    "run_skipped": {"target": (STR, True), "kind": (_one_of(*RUN_KINDS), True),
                    "category": (STR, False), "reason": (STR.or_null(), False)},
    "run_exited": {"run": (STR, True), "exit_code": (INT.or_null(), False),
                   "note": (STR.or_null(), False), "duration_s": (FINITE.or_null(), False),
                   "read_whole": (BOOL, False), "final_metric": (FINITE.or_null(), False),
                   "non_finite": (STR.or_null(), False), "unread_bytes": (INT, False),
                   "delivered_path": (STR.or_null(), False),
                   "delivered_step": (INT.or_null(), False),
                   "delivered_metric": (STR.or_null(), False),
                   "delivered_value": (FINITE.or_null(), False),
                   "stopped_by": (STR.or_null(), False),  # who asked it to stop, if any
                   "signaled": (BOOL, False)},  # its launcher saw SIGTERM (exit.json)
    "run_reattached": {"run": (STR, True), "pid": (PID.or_null(), False)},
    "run_killed": {"run": (STR, True), "signal": (STR, False),
                   "after_s": (FINITE.or_null(), False)},
    "run_terminated": {"run": (STR, True), "signal": (STR, False)},
    "run_launch_failed": {"run": (STR, True), "error": (STR, False)},
    "run_launch_abandoned": {"run": (STR, True), "reason": (STR, False)},
    "checkpoint_verification_started": {"run": (STR, True), "path": (STR, True),
                                        "attempt": (INT, False), "pid": (PID, False)},
    "stop_rule_fired": {"run": (STR, True), "rule": (STR, True), "reason": (STR, True),
                        "value": (SCALAR.or_null(), False), "step": (NUMBER.or_null(), False),
                        "record_t": (NUMBER.or_null(), False)},
    "run_stop_requested": {"run": (STR, True), "by": (STR, True),
                           "reason": (STR.or_null(), False), "signal": (STR, False),
                           "deadline": (TIME.or_null(), False),
                           "term_at": (TIME.or_null(), False),
                           "step": (NUMBER.or_null(), False)},
    "checkpoint_requested": {"run": (STR, True), "request_seq": (INT, False),
                             "by": (STR, False)},
    "checkpoint_acknowledged": {"run": (STR, True), "path": (STR.or_null(), False),
                                "sha256": (STR.or_null(), False),
                                "digest": (STR.or_null(), False),
                                "bytes": (INT.or_null(), False),
                                "write_s": (FINITE.or_null(), False),
                                "block_s": (FINITE.or_null(), False),
                                "step": (NUMBER.or_null(), False),
                                "mode": (STR.or_null(), False),
                                "held": (STR.or_null(), False)},
    "checkpoint_rotated": {"run": (STR, True), "path": (STR, True),
                           "step": (NUMBER.or_null(), False),
                           "verified": (BOOL.or_null(), False)},
    "checkpoint_verified": {"run": (STR, True), "path": (STR.or_null(), False),
                            "ok": (BOOL, True), "problem": (STR.or_null(), False),
                            "step": (NUMBER.or_null(), False)},
    "resume_check_result": {"run": (STR, True), "ok": (BOOL.or_null(), False),
                            "steps_compared": (INT.or_null(), False),
                            "max_abs_diff": (NUMBER.or_null(), False),
                            "problem": (STR.or_null(), False)},
    "decision_pending": {"pilot": (PILOT, False), "deadline": (TIME.or_null(), False),
                         "default": (_one_of(*DECISION_DEFAULTS).or_null(), False),
                         "auto": (STR.or_null(), False)},
    "decision_taken": {"decision": (_one_of(*DECISIONS), True), "drop": (STR_LIST, False),
                       "by": (STR.or_null(), False), "note": (STR.or_null(), False)},
    "variant_dropped": {"variant": (STR, True), "reason": (STR.or_null(), False)},
    "queue_paused": {},
    "queue_resumed": {},
    "warning": {"message": (STR, True), "run": (STR.or_null(), False)},
    "notice_sent": {"kind": (STR, True)},  # once-per-campaign notices (the window's)
    # the system announced the box's end (SIGTERM from a shutdown, a preemption notice):
    # every live run asked for a checkpoint, the engine waits `grace_s` and goes
    "box_going_down": {"signal": (STR, True), "grace_s": (FINITE, True),
                       "runs": (STR_LIST, True), "host": (STR.or_null(), False),
                       "notice": (STR.or_null(), False)},
    # what the box-down grace saved: run -> its last verified checkpoint, and runs without
    "box_checkpointed": {"saved": (STR_MAP, True), "unsaved": (STR_LIST, True),
                         "waited_s": (FINITE, False)},
    # `itera-tui resume URL`: the campaign continues on another box (the one plan change)
    "campaign_moved": {"store": (STR, True), "from_host": (STR.or_null(), False),
                       "host": (STR.or_null(), False), "cut": (STR_LIST, True),
                       "last_t": (TIME.or_null(), False), "window_hours": (FINITE, True),
                       "price_usd": (FINITE, True), "lot": (STR.or_null(), False),
                       # run -> the verified checkpoint fetched for it (what it resumes from)
                       "checkpoints": (STR_MAP, False)},
    # the wall clock moved by more than a tick could explain (an NTP step, a suspend)
    "clock_stepped": {"by_s": (FINITE, True), "wall_before": (TIME, False),
                      "note": (STR, False)},
    # processes that outlived their run (own session, ignored SIGTERM): named, then ended
    "run_leftovers": {"run": (STR, True), "signal": (STR, False),
                      "grace_s": (FINITE.or_null(), False), "processes": (PROCESSES, True)},
    "run_leftovers_killed": {"run": (STR, True), "signal": (STR, False),
                             "processes": (PROCESSES, True)},
    "wrapup_started": {},
    "wrapup_done": {"bundle": (STR.or_null(), False), "verified": (BOOL, False),
                    "failures": (INT, False), "bytes": (INT.or_null(), False),
                    "unverified": (STR_MAP, False)},
    # the off-box store (tui.store): each object stored whole with its sha256, the store
    # going away and coming back, and the bundle delivered and verified at the store
    "store_object": {"kind": (STR, True), "key": (STR, True), "bytes": (INT, True),
                     "sha256": (STR, True), "run": (STR.or_null(), False)},
    "store_down": {"url": (STR, True), "message": (STR, True)},
    "store_at_risk": {"message": (STR, True)},
    "store_up": {"url": (STR, True), "down_s": (FINITE.or_null(), False),
                 "stored": (INT.or_null(), False)},
    "store_delivered": {"url": (STR, True), "verified": (BOOL, True), "files": (INT, True),
                        "bytes": (INT, True), "seconds": (FINITE.or_null(), False),
                        "problems": (STR_LIST, False)},
}

# Losing one of these would make a restart relaunch a run, reset the rental
# window, start the campaign over or change what the decision allowed: the
# engine refuses to guess (see tui.engine.ledger_check).
CRITICAL = {
    "campaign_started": "the campaign would start over",
    "window_started": "the rental window would be reset",
    "run_launched": "that run would be launched again into its old directory",
    "decision_taken": "the decision would be taken again",
    "variant_dropped": "a dropped variant could be launched",
}


_ABSENT = object()
_CHECKS = {event: tuple((name, kind, required) for name, (kind, required) in fields.items())
           for event, fields in SCHEMAS.items()}  # read once per line: kept flat
_COMMON = tuple((name, kind, True) for name, kind in COMMON.items())


def problem_of(record: dict) -> str | None:
    """Why `record` cannot be replayed (the first problem found), or None if it can."""
    problem = _first_problem(record, _COMMON)
    if problem is None:
        problem = _first_problem(record, _CHECKS.get(record["event"], ()))
    return problem


def _first_problem(record: dict, checks) -> str | None:
    for name, kind, required in checks:
        value = record.get(name, _ABSENT)
        if value is _ABSENT:
            if required:
                return f"field {name!r} is missing"
        elif not (kind.nullable if value is None else kind.accepts(value)):
            return f"field {name!r} must be {kind.what}, got {_shown(value)}"
    return None


def _shown(value) -> str:
    try:
        text = repr(value)
    except RecursionError:
        text = f"a deeply nested {type(value).__name__}"
    return text if len(text) <= 40 else text[:37] + "..."
