"""`itera-tui run --headless` and `itera-tui wrapup`: the engine without a UI.

Prints one line per event. Killing it (even with -9) never touches the runs;
starting it again reattaches. At a decision point with `decide = "ask"` and no
`--decide`, it stops and says how to continue, since nobody can be asked.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

from ..campaign import load_plan
from .engine import Engine
from .errors import EngineError
from .events import clock_text, describe
from .scheduler import blocking_steps

EXIT_AWAITING_DECISION = 3  # not a failure, not done: the campaign waits for a person


def _print_event(ev: dict) -> None:
    line = describe(ev)
    if line:
        print(f"[{clock_text(ev['t'])}] {line}", flush=True)


def default_probes(plan):
    """NVML + host probes; they report a missing driver rather than failing."""
    from ..probes import HostProbe, NvmlProbe, Probes

    return Probes(NvmlProbe(), HostProbe({"state": plan.state_dir,
                                          "outputs": plan.outputs_dir}))


def _sigterm_as_interrupt(signum, frame):
    raise KeyboardInterrupt


def run_headless(path: Path, decide: str | None = None, wrapup: bool = True,
                 poll_interval: float = 0.25) -> int:
    plan = load_plan(path)
    engine = Engine(plan, probes=default_probes(plan), decide=decide,
                    poll_interval=poll_interval, on_event=_print_event)
    if decide is not None:
        if plan.pilot is None:
            raise EngineError("--decide: this plan has no [pilot], so no decision point")
        engine.parse_decision(decide)  # refused now, not after hours of pilot
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    engine.open()
    try:
        if engine.state.paused:  # nobody could resume it without a UI: say so, go on
            print("the queue was paused in the control room; resuming it", flush=True)
            engine.set_paused(False)
        while not engine.finished:
            engine.tick()
            if engine.snapshot().phase == "decision" and not engine.auto_decision:
                print("decision point reached: continue with `itera-tui run --headless "
                      "--decide continue|drop:ID|wrapup` or in the control room", flush=True)
                return EXIT_AWAITING_DECISION
            time.sleep(poll_interval)
        blocked = blocking_steps(plan, engine.state)
        for run in blocked:
            reason = (run.stop or {}).get("reason") or f"exit status {run.exit_code}"
            print(f"campaign blocked: {run.target} {run.state} ({reason}); no pilot or run "
                  "was started", flush=True)
        if not wrapup:
            return 1 if blocked else 0
        code = finish_wrapup(engine, poll_interval)
        return 1 if blocked else code
    finally:
        engine.close()


def finish_wrapup(engine: Engine, poll_interval: float = 0.25, progress=None) -> int:
    """Stop what runs (checkpoint first), wait for exits, build and verify the bundle."""
    from ..bundle.wrapup import build_bundle

    say = progress or (lambda msg: print(f"[{clock_text(time.time())}] {msg}", flush=True))
    engine.begin_wrapup()
    while engine.state.running:
        engine.tick()
        time.sleep(poll_interval)
    engine.tick()  # collect pending checkpoint verifications
    deadline = time.time() + 60
    while engine._verifying and time.time() < deadline:
        engine.tick()
        time.sleep(poll_interval)
    result = build_bundle(engine.plan, progress=say)
    engine.record_wrapup(bundle=result.bundle_rel, verified=result.verified,
                         failures=len(result.failures), bytes=result.bytes)
    for failure in result.failures:
        print(f"  FAIL {failure['path']}: {failure['problem']}", file=sys.stderr)
    return 0 if result.verified else 1


def wrapup_command(path: Path, as_json: bool = False) -> int:
    plan = load_plan(path, check_files=False)
    engine = Engine(plan, probes=None, on_event=None if as_json else _print_event)
    engine.open()
    try:
        code = finish_wrapup(engine, progress=(lambda m: None) if as_json else None)
        if as_json:
            print(json.dumps(engine.state.wrapup, indent=2))
        return code
    finally:
        engine.close()
