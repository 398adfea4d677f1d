"""One run as its screen shows it: what ran, how it stands, why it stopped, its checkpoints.

Everything here comes from the snapshot the app already holds (the ledger's
RunState and the engine's live view), so the run screen shows the same
figures as the table (final metric, the stop's step) and needs no file read
on the UI thread; the stdout/stderr tails are read apart (`tails.py`).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from ..campaign.loading.sections import rule_label
from ..engine.ledger.state import TERMINAL
from ..engine.lost_work import cut_run
from . import format as fmt
from .rows import (final_value, planned_steps, run_label, shown_step, state_text,
                   verification_mark)

MAX_CHECKPOINTS = 4


@dataclass(frozen=True)
class RunDetail:
    run_id: str
    title: str
    facts: tuple[tuple[str, str], ...]  # (label, text), shown wrapped with a hanging indent


def _command(plan, run) -> tuple[str, str]:
    argv = run.config.get("argv") if isinstance(run.config, dict) else None
    params = run.config.get("params") if isinstance(run.config, dict) else None
    if argv is None or params is None:
        try:
            spec = plan.variant(run.target) if run.kind in ("pilot", "run") \
                else plan.step(run.target)
        except KeyError:
            spec = None
        argv = argv if argv is not None else list(getattr(spec, "command", ()) or ())
        params = params if params is not None else dict(getattr(spec, "params", ()) or ())
    command = shlex.join(str(a) for a in argv) if argv else "(none)"
    shown = ", ".join(f"{k}={v}" for k, v in params.items()) if params else "(none)"
    return command, shown


def _bytes(n: int | None) -> str:
    if n is None:
        return "? B"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _checkpoints(run, now: float) -> list[tuple[str, str]]:
    if not run.checkpoints:  # a run that is over will not write one: no "yet"
        return [("ckpts", "none: it ended without one" if run.state in TERMINAL
                 else "none acknowledged yet")]
    out = []
    acks = run.checkpoints[-MAX_CHECKPOINTS:]
    for ack in acks:
        mark = verification_mark(run, ack)
        verdict = run.verdict_of(ack)
        said = {"✓": "verified", "?": "verifying…", "↻": "rotated away by the trainer",
                "↷": "saved over by a later save before its turn (not a failure)",
                "✗": f"FAILED: {verdict.problem if verdict else ''}"}[mark]
        if mark != "↻" and ack.path in run.rotated:
            said += " · rotated away by the trainer since"
        out.append(("", f"{mark} {ack.step_text()} · {_bytes(ack.bytes)} · "
                        f"{fmt.duration(max(0.0, now - ack.t))} ago · {said} · {ack.path}"))
    head = f"{len(run.checkpoints)} acknowledged" + (
        f" (last {len(acks)})" if len(acks) < len(run.checkpoints) else "")
    return [("ckpts", head)] + out


def run_detail(plan, room, run_id: str) -> RunDetail | None:
    state = room.state
    try:
        run = state.run(run_id)
    except KeyError:
        return None
    view = room.engine.live.get(run_id)
    now = room.now
    metric = plan.campaign.metric
    state_word = run.state
    if run.state == "running" and run.stop_requested:
        state_word = "stopping"
    step = shown_step(run, view)
    total = run.max_steps or planned_steps(plan, run.kind, run.target)
    progress = f"step {step if step is not None else '—'}" + (f" of {total}" if total else "")
    command, params = _command(plan, run)
    started = fmt.local_clock(run.launched_t)
    ran = None if run.launched_t is None else \
        (run.ended_t if run.ended_t is not None else now) - run.launched_t
    facts = [
        ("state", f"{state_text(run, state_word)} · {progress}"
                  + (f" · exit {run.exit_code}" if run.exit_code is not None else "")),
        ("command", command),
        ("params", params),
        ("where", f"{run.category} · lanes {', '.join(run.lanes) or '—'}"
                  + (f" · CUDA_VISIBLE_DEVICES={run.devices}" if run.devices else "")),
        ("time", f"started {started} · ran {fmt.duration(ran)}"
                 + (" (still running)" if run.ended_t is None and run.alive else "")),
        ("figures", f"loss {fmt.number(view.last_loss if view else None)} · {metric} "
                    f"{fmt.number(final_value(view, metric))} (last) · best "
                    f"{fmt.number(view.best_metric if view else None)}"
                    + (f" · {view.bad_lines} unreadable lines" if view and view.bad_lines
                       else "")),
    ]
    if run.stop is not None:
        where = f" at step {run.stop.step}" if run.stop.step is not None else ""
        value = f" = {fmt.number(run.stop.value)}" if run.stop.value is not None else ""
        facts.append(("stop", f"{rule_label(run.stop.rule)}{value}{where}: {run.stop.reason or '—'}"))
    elif run.stop_requested is not None:
        req = run.stop_requested
        facts.append(("stop", f"requested by {req.by}: {req.reason}"))
    facts += _checkpoints(run, now)
    cut = run if run.state == "cut" else next(
        (r for r in state.runs if r.id == run.resumes and r.state == "cut"), None)
    if cut is not None:  # a box's end: the work redone, as status and the report say it
        facts.append(("cut", cut_run(state, cut).line()))
    if run.resume_check is not None:
        rc = run.resume_check
        facts.append(("resume", "resume check passed" if rc.ok else
                      f"resume check FAILED: {rc.problem}"))
    title = f"{run_label(run.kind, run.target, run.attempt)} · {run.id}"
    return RunDetail(run.id, title, tuple(facts))
