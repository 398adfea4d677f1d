"""`itera-tui run --headless` and `itera-tui wrapup`: the engine in the foreground.

The same `EngineService` the detached engine runs (a room or a CLI action may
attach to it through its socket), printing one line per event. Killing it (even with -9) never touches the runs;
starting it again reattaches. At a decision point with `decide = "ask"` and no
`--decide`, it stops and says how to continue, since nobody can be asked. A
`continue` (given or planned) is applied only once the pilots are seen: when
the control's pilot failed it stops there (exit 1) unless `--force-continue`.
On a plan without `[pilot]`, `--decide` is a no-op, said in one line.
Exit 0 only when the bundle verified and the verdict exists; 4 when nothing was
accepted because the runs failed; 7 when it would be 0 but the verified bundle's
delivery to the `[store]` failed (the bundle is fine, here: not a failed wrap-up).
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from ..campaign.boxes import is_multi_box
from ..engine import Engine
from ..engine.decision.answer import Decision
from ..engine.ledger.lines import clock_text, describe
from ..engine.ledger.events import DecisionKind, Event, WarningEvent
from ..engine.scheduler import blocking_steps
from ..session.probes import default_probes
from ..session.session import CampaignSession, load_campaign
from .commands import EXIT_NOT_DELIVERED, said_undelivered

EXIT_AWAITING_DECISION = 3  # not a failure, not done: the campaign waits for a person
EXIT_NOTHING_ACCEPTED = 4  # the runs failed: no deliverable accepted, no honest "no" either


def _print_event(ev: Event) -> None:
    if isinstance(ev, WarningEvent) and ev.message.startswith(
            ("wrap-up failed", "wrap-up unavailable")):
        return  # the command's own last line on stderr says it, once
    line = describe(ev)
    if line:
        print(f"[{clock_text(ev.t)}] {line}", flush=True)


def _say(line: str) -> None:
    print(f"[{clock_text(time.time())}] {line}", flush=True)


def _sigterm_as_interrupt(signum, frame):
    raise KeyboardInterrupt


def run_headless(path: Path, decide: Decision | None = None, wrapup: bool = True,
                 poll_interval: float = 0.25, force_continue: bool = False,
                 lot: str | None = None) -> int:
    """The engine in the foreground: the same service the detached engine runs (a room
    or a CLI action may attach to it), printing one line per event."""
    from .paths import socket_path
    from .server import EngineService, ServeEnd, WrapupPolicy

    plan = load_campaign(path)
    if decide is not None:
        decide.check(plan)  # a mandatory or unknown variant: refused now, not after the pilot
    if decide is not None and plan.pilot is None:
        # scripts pass one set of flags to every campaign: without a decision point the
        # flag is a no-op, said once (a typo in it is still refused, above)
        print(f"--decide {decide.text}: this plan has no [pilot], so no decision point; the "
              "flag changes nothing", flush=True)
        decide = None
    engine = Engine(plan, poll_interval=poll_interval, decide=decide, lot=lot)
    session = CampaignSession(plan, engine=engine, probes=default_probes(plan), decide=decide,
                              poll_interval=poll_interval, sample_interval=10.0)
    session.subscribe(_print_event)
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    session.open()
    done = _verified_wrapup(session)
    service = EngineService(session, socket_path(plan.state_dir), poll_interval=poll_interval,
                            wrapup=WrapupPolicy.ALWAYS if wrapup and done is None
                            else WrapupPolicy.NEVER,
                            # a far box's share (--lot): the first box decides for every box,
                            # so it waits at the decision point rather than exiting
                            exit_at_decision=lot is None, on_line=_say,
                            hold_continue=not force_continue,
                            on_error=lambda text: print(f"itera-tui: {text}", file=sys.stderr,
                                                        flush=True))
    # from here a SIGTERM is the system's (a shutdown, a reclaimed box): every live run
    # checkpoints first, as the detached engine does (engine/checkpoints/box_down.py)
    signal.signal(signal.SIGTERM, lambda signum, frame: service.signalled(signum))
    from .preemption import watch_for

    preemption = None
    try:
        service.listen()
        preemption = watch_for(plan, service, _say)  # a provider's notice: the same path
        if decide is not None and decide.kind is DecisionKind.DROP:
            from ..engine.conclusion.verdict import last_challenger_warning

            said = last_challenger_warning(plan, session.engine.state,
                                           list(decide.variants))
            if said:  # the same warning the room's drop confirm gives
                print(f"itera-tui: warning: {said}", file=sys.stderr, flush=True)
        if lot is None and is_multi_box(plan):  # the first box starts the others' shares
            from ..remote.start import start_boxes

            start_boxes(plan, decide=decide, on_line=_say)
        if session.engine.state.paused:  # nobody could resume it without a UI: say so
            print("the queue was paused in the control room; resuming it", flush=True)
            session.pause(False)
        end = service.serve()
        # the loop has stopped ticking: a run's leftover that ignored its SIGTERM would
        # outlive this process (nobody signals it again), so it gets its grace and SIGKILL
        session.engine.end_leftovers()
        if end is ServeEnd.AWAITING_DECISION:
            print("decision point reached: answer with `itera-tui decide "
                  "continue|drop:ID|wrapup` (it starts the engine to carry on), `itera-tui "
                  "run --headless --decide continue|drop:ID|wrapup`, or in the control room "
                  "(`itera-tui`)", flush=True)
            return EXIT_AWAITING_DECISION
        if end is ServeEnd.HELD:
            print(f"itera-tui: not continuing: {service.held_warning}; continue anyway with "
                  "--force-continue", file=sys.stderr, flush=True)
            return 1
        if end is ServeEnd.BOX_DOWN:
            from ..engine.moves import how_to_continue

            print("the box is going down: the runs checkpointed; continue with "
                  f"{how_to_continue(plan)}", flush=True)
            return 0
        if end is ServeEnd.SUPERSEDED:
            print(f"itera-tui: {session.superseded()}: the runs were stopped after a "
                  "checkpoint and nothing more is written to the store", file=sys.stderr,
                  flush=True)
            return 1
        if end is ServeEnd.SHUTDOWN:
            print("the engine was asked to stop; the runs go on in their own sessions",
                  flush=True)
            return 0
        blocked = blocking_steps(plan, session.engine.state)
        for run in blocked:
            print(f"campaign blocked: {run.target} {run.state} ({run.why_ended}); no pilot "
                  "or run was started", flush=True)
        if not wrapup:
            return 1 if blocked else 0
        if done is not None:  # a restart of a finished campaign: the bundle is not redone
            _say(f"the wrap-up is done: bundle verified at {done} (`itera-tui wrapup` "
                 "builds it again)")
            ok = True
        else:
            result = session.wrapup_progress()
            ok = bool(result.ok)
            if not result.ok:
                print(f"itera-tui: {result.text}", file=sys.stderr, flush=True)
        ending = session.step(tick=False, sample=False).ending
        for line in ending.lines() if ending else ():  # the same words as the done screen
            print(line, flush=True)
        if ending is not None and ending.bundle and ending.verified:
            print(_fetch_line(plan, ending.bundle, ending.store), flush=True)
        undelivered = ok and done is None and _said_undelivered(session)
        if blocked or not ok or ending is None or not ending.verdict.exists:
            return 1
        if ending.failed_only:
            return EXIT_NOTHING_ACCEPTED
        return EXIT_NOT_DELIVERED if undelivered else 0
    finally:
        if preemption is not None:
            preemption.close()
        service.close()
        session.close()


def _fetch_line(plan, bundle_rel: str, stored=None) -> str:
    """The done screen's fetch command, for the person at this terminal (their ssh's
    user, address and port; the store's copy once it verified there), and where the
    wrap-up wrote it whole."""
    from ..campaign.retrieval import Origin, fetch_command, fetch_file

    bundle = getattr(stored, "bundle", None)
    return (f"fetch it: {fetch_command(plan, bundle_rel, Origin.here(plan), bundle)} "
            f"(also in {fetch_file(bundle_rel)})")


def _said_undelivered(session) -> bool:
    """`said_undelivered` for an in-process session (its mirror's status)."""
    mirror = session.mirror
    return said_undelivered(session.plan, mirror.status() if mirror is not None else None,
                            session.engine.state.wrapup)


def _verified_wrapup(session) -> str | None:
    """The bundle a done, verified wrap-up recorded, if it is still there; else None."""
    wrap = session.engine.state.wrapup
    if wrap is None or wrap.state != "done" or not wrap.verified or not wrap.bundle:
        return None
    bundle = session.plan.root / wrap.bundle
    return wrap.bundle if (bundle / "manifest.json").is_file() else None


def wrapup_command(path: Path, as_json: bool = False, lot: str | None = None) -> int:
    plan = load_campaign(path, check_files=False)
    session = CampaignSession(plan, engine=Engine(plan, lot=lot) if lot else None)
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
        if not result.ok:
            return 1
        return EXIT_NOT_DELIVERED if _said_undelivered(session) else 0
    finally:
        session.close()
