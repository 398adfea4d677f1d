"""The detached engine: a supervisor and the engine process it keeps alive.

`itera-tui` starts, through `start_detached`, a supervisor in its own session
(no terminal: closing the tmux window, losing ssh or quitting the room never
reaches it), with its output in `.itera/engine.log`. The supervisor runs the
engine as its child and, when the engine dies of anything but an end it
chose (kill -9, the OOM killer, a crash), starts it again after a second, at
most `MAX_RESTARTS` times in `RESTART_WINDOW_S`: the new engine reattaches
from the ledger (runs still alive are adopted, none launched twice) and
records `engine_restarted` with the cause, which every client shows.

    python -m tui.service.daemon supervise CAMPAIGN   # what start_detached runs
    python -m tui.service.daemon engine CAMPAIGN      # the engine itself (the child)

Every box of a campaign runs this: another box's engine is started (over ssh,
`tui.remote.start`) as `supervise` in that box's folder, whose `.itera/lot`
names its share, so it too is restarted after a crash and adopts its runs.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import subprocess
import sys
import time
from collections import deque
from pathlib import Path

from ..engine.decision.answer import Decision
from ..engine.ledger.events import EngineRestarted
from .lifetime import IDLE_EXIT_S

EXIT_STOPPED = 0  # the campaign ended, or the engine was stopped on purpose
EXIT_BAD_INPUT = 2  # the plan cannot be driven (it says why in the log)
EXIT_TAKEN = 3  # another engine already drives this campaign
EXIT_NO_LEDGER = 5  # the ledger cannot be written: restarting would fail the same way
# (tui.engine.errors.EXIT_LEDGER_UNWRITABLE, the same status `run --headless` exits with)
EXIT_NO_DESCRIPTORS = 6  # the ledger could not be opened for want of file descriptors: the
# process's problem, not the ledger's, and a new engine starts with none held: restarted
FINAL_EXITS = (EXIT_STOPPED, EXIT_BAD_INPUT, EXIT_TAKEN, EXIT_NO_LEDGER)
OUT_OF_DESCRIPTORS = (errno.EMFILE, errno.ENFILE)
MAX_RESTARTS = 5
# the detached engine's pass: runs' records read, rules applied, requests answered this
# often (a stop rule fires within about two of them, on this box or another's)
ENGINE_POLL_S = 0.5
RESTART_WINDOW_S = 600.0
RESTART_DELAY_S = 1.0
BYE = {"shutdown": "the engine was stopped on purpose (the runs are left alone)",
       "box_down": "the box is going down: the runs checkpointed",
       "superseded": "another box took the campaign over at the store: the runs were "
                     "stopped after a checkpoint and nothing more is written there",
       "idle": "the engine ended: the campaign is done and nobody watched for 30 min"}
def _log(text: str) -> None:
    print(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {text}", flush=True)


def _engine_argv(campaign: Path, after_crash: str | None, restarts: int,
                 decide: Decision | None = None) -> list[str]:
    argv = [sys.executable, "-m", "tui.service.daemon", "engine", str(campaign)]
    if decide:
        argv += ["--decide", decide.text]
    if after_crash:
        argv += ["--after-crash", after_crash, "--restarts", str(restarts)]
    return argv


def _why(code: int) -> str:
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return f"killed by {name}"
    return f"exited with status {code}"


def supervise(campaign: Path, decide: Decision | None = None) -> int:
    """Run the engine until it ends on purpose; restart it when it dies."""
    child: subprocess.Popen | None = None
    stopping = False

    def forward(signum, frame):
        nonlocal stopping
        stopping = True
        if child is not None and child.poll() is None:
            child.send_signal(signal.SIGTERM)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    restarts: deque[float] = deque()
    after_crash, count = None, 0
    _log(f"supervisor {os.getpid()} starts the engine for {campaign.name}")
    while True:
        child = subprocess.Popen(_engine_argv(campaign, after_crash, count, decide),
                                 stdin=subprocess.DEVNULL)
        code = child.wait()
        if stopping or code in FINAL_EXITS:
            _log(f"engine {child.pid} {_why(code)}; the supervisor ends")
            return code if code != EXIT_STOPPED else 0
        now = time.monotonic()
        while restarts and now - restarts[0] > RESTART_WINDOW_S:
            restarts.popleft()
        if len(restarts) >= MAX_RESTARTS:
            _log(f"engine {child.pid} {_why(code)}: {MAX_RESTARTS} restarts within "
                 f"{RESTART_WINDOW_S / 60:g} min, giving up (`itera-tui` starts it again)")
            return 1
        restarts.append(now)
        count += 1
        after_crash = _why(code)
        _log(f"engine {child.pid} {after_crash}; restarting it (restart {count})")
        time.sleep(RESTART_DELAY_S)


def run_engine(campaign: Path, after_crash: str | None = None, restarts: int = 0,
               decide: Decision | None = None) -> int:
    """`decide`: the decision given when the campaign was started (`--decide`), for a
    box that cannot be asked (another box's share: the first box decides for all)."""
    from ..campaign import PlanError
    from ..engine.errors import CampaignDriven, EngineError, LedgerUnwritable
    from ..session import CampaignSession, default_probes, load_campaign
    from .paths import socket_path
    from .server import EngineService, WrapupPolicy

    try:
        plan = load_campaign(campaign)
    except PlanError as exc:
        for line in exc.problems:
            _log(f"cannot drive the campaign: {line}")
        return EXIT_BAD_INPUT
    session = CampaignSession(plan, probes=default_probes(plan), poll_interval=ENGINE_POLL_S,
                              sample_interval=1.0, decide=decide)
    try:
        session.open()
    except CampaignDriven as exc:
        _log(str(exc))
        return EXIT_TAKEN
    except EngineError as exc:
        _log(str(exc))
        return EXIT_BAD_INPUT
    service = preemption = None
    try:
        if after_crash:
            session.engine.journal.record(EngineRestarted(pid=os.getpid(),
                                          reason=after_crash, restarts=restarts))
        service = EngineService(session, socket_path(plan.state_dir), poll_interval=ENGINE_POLL_S,
                                wrapup=WrapupPolicy.ONCE, idle_exit_s=IDLE_EXIT_S,
                                on_line=_log)
        # SIGTERM comes from the system (a shutdown, a reclaimed box: the supervisor
        # forwards its own), never from a person's `engine stop` (the socket): the box
        # is going away, so every live run checkpoints first; the supervisor then ends
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # flags only: no lock
            signal.signal(sig, lambda signum, frame: service.signalled(signum))
        service.listen()
        _log(f"engine {os.getpid()} drives {plan.campaign.name}; socket ready")
        from .preemption import watch_for

        preemption = watch_for(plan, service, _log)  # a provider's notice, as a SIGTERM
        if not after_crash:
            _start_other_boxes(plan, session.engine)
        try:
            end = service.serve()
        except LedgerUnwritable as exc:  # the engine stopped: say why, to the log and rooms
            _log(str(exc))
            if exc.errno in OUT_OF_DESCRIPTORS:  # not the ledger: a fresh engine can write it
                service.say_bye(f"{exc}; the engine restarts")
                return EXIT_NO_DESCRIPTORS
            service.say_bye(str(exc))
            return EXIT_NO_LEDGER
        _log(f"engine {os.getpid()} ends: {end.value}")
        if end.value == "box_down":  # what continues it, true for this plan
            from ..engine.moves import how_to_continue

            service.say_bye(f"{BYE['box_down']}; continue with {how_to_continue(plan)}")
        else:
            service.say_bye(BYE.get(end, end.value))
        return EXIT_STOPPED
    finally:
        if preemption is not None:
            preemption.close()
        if service is not None:
            service.close()
        session.close()


def _start_other_boxes(plan, engine) -> None:
    """The first box's engine starts the other boxes' shares (rsync, the far check, the
    far engine), in a thread: an unreachable box costs its ssh timeouts, not the rules."""
    import threading

    from ..campaign.boxes import is_multi_box

    if not is_multi_box(plan) or (engine.share is not None and engine.share.remote):
        return
    from ..remote.start import start_boxes

    threading.Thread(target=start_boxes, kwargs={"plan": plan, "on_line": _log},
                     name="itera-boxes", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.service.daemon")
    parser.add_argument("role", choices=("supervise", "engine"))
    parser.add_argument("campaign")
    parser.add_argument("--after-crash", default=None)
    parser.add_argument("--restarts", type=int, default=0)
    parser.add_argument("--decide", default=None)
    parser.add_argument("--detach", action="store_true",
                        help="fork: the supervisor is nobody's child (the caller returns)")
    args = parser.parse_args(argv)
    campaign = Path(args.campaign).absolute()
    # a far box's share is started with the first box's `--decide` (remote/start.py)
    decide = Decision.parse(args.decide) if args.decide is not None else None
    if args.role == "supervise":
        if args.detach and os.fork() > 0:
            os._exit(0)  # the caller's child returns; the supervisor lives on, reparented
        return supervise(campaign, decide)
    return run_engine(campaign, args.after_crash, args.restarts, decide)


if __name__ == "__main__":
    sys.exit(main())
