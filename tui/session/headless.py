"""`itera-tui run --headless` and `itera-tui wrapup`: a session with no UI.

Prints one line per event. Killing it (even with -9) never touches the runs;
starting it again reattaches. At a decision point with `decide = "ask"` and no
`--decide`, it stops and says how to continue, since nobody can be asked. A
`continue` (given or planned) is applied only once the pilots are seen: when
the control's pilot failed it stops there (exit 1) unless `--force-continue`.
Exit 0 only when the bundle verified and the verdict exists; 4 when nothing was
accepted because the runs failed.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from ..engine import EngineError
from ..engine.events import clock_text, describe
from ..engine.scheduler import blocking_steps
from .probes import default_probes
from .session import CampaignSession, load_campaign

EXIT_AWAITING_DECISION = 3  # not a failure, not done: the campaign waits for a person
EXIT_NOTHING_ACCEPTED = 4  # the runs failed: no deliverable accepted, no honest "no" either


def _print_event(ev: dict) -> None:
    line = describe(ev)
    if line:
        print(f"[{clock_text(ev['t'])}] {line}", flush=True)


def _say(line: str) -> None:
    print(f"[{clock_text(time.time())}] {line}", flush=True)


def _sigterm_as_interrupt(signum, frame):
    raise KeyboardInterrupt


def run_headless(path: Path, decide: str | None = None, wrapup: bool = True,
                 poll_interval: float = 0.25, force_continue: bool = False) -> int:
    plan = load_campaign(path)
    session = CampaignSession(plan, probes=default_probes(plan), decide=decide,
                              poll_interval=poll_interval, sample_interval=10.0)
    if decide is not None:
        if plan.pilot is None:
            raise EngineError("--decide: this plan has no [pilot], so no decision point")
        session.engine.parse_decision(decide)  # refused now, not after hours of pilot
    held = None  # "continue" waits at the decision point to see the control's pilot
    if not force_continue and session.engine.auto_decision == "continue":
        held, session.engine.auto_decision = "continue", None
    session.subscribe(_print_event)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    session.open()
    try:
        if decide is not None and decide.startswith("drop:"):
            from ..engine.verdict import last_challenger_warning

            said = last_challenger_warning(plan, session.engine.state,
                                           session.engine.parse_decision(decide)[1])
            if said:  # the same warning the room's drop confirm gives
                print(f"itera-tui: warning: {said}", file=sys.stderr, flush=True)
        if session.engine.state.paused:  # nobody could resume it without a UI: say so
            print("the queue was paused in the control room; resuming it", flush=True)
            session.pause(False)
        while True:
            snap = session.step()
            if snap.engine.finished:
                break
            if snap.phase == "decision" and held:
                warning = _held_continue(plan, snap.state)
                if warning:
                    print(f"itera-tui: not continuing: {warning}; continue anyway with "
                          "--force-continue", file=sys.stderr, flush=True)
                    return 1
                session.engine.auto_decision, held = held, None
                continue
            if snap.phase == "decision" and not session.engine.auto_decision:
                print("decision point reached: continue with `itera-tui run --headless "
                      "--decide continue|drop:ID|wrapup` or in the control room", flush=True)
                return EXIT_AWAITING_DECISION
            time.sleep(poll_interval)
        blocked = blocking_steps(plan, session.engine.state)
        for run in blocked:
            print(f"campaign blocked: {run.target} {run.state} ({run.why_ended}); no pilot "
                  "or run was started", flush=True)
        if not wrapup:
            return 1 if blocked else 0
        result = session.wrapup(on_line=_say)
        if not result.ok:
            print(f"itera-tui: {result.text}", file=sys.stderr, flush=True)
        ending = session.step(tick=False, sample=False).ending
        for line in ending.lines() if ending else ():  # the same words as the done screen
            print(line, flush=True)
        if blocked or not result.ok or ending is None or not ending.verdict.exists:
            return 1
        return EXIT_NOTHING_ACCEPTED if ending.failed_only else 0
    finally:
        session.close()


def _held_continue(plan, state) -> str | None:
    from ..engine.pilots import continue_warning

    pending = state.decision_pending
    return continue_warning(plan, pending.pilot) if pending is not None else None


def wrapup_command(path: Path, as_json: bool = False) -> int:
    plan = load_campaign(path, check_files=False)
    session = CampaignSession(plan)
    if not as_json:
        session.subscribe(_print_event)
    session.open()
    try:
        result = session.wrapup(on_line=None if as_json else _say)
        if not result.ok and not as_json:
            print(f"itera-tui: {result.text}", file=sys.stderr, flush=True)
        if as_json:
            wrap = session.engine.state.wrapup
            print(json.dumps(wrap.to_dict() if wrap else None, indent=2))
        return 0 if result.ok else 1
    finally:
        session.close()
