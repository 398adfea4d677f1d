"""The command line as a client of the engine process: act, stop it, bridge it.

`itera-tui checkpoint|stop|drop|decide|pause|resume|wrapup` send one action
to the campaign's engine and print its answer, in the same words the room
shows (the refusals live in the session layer, which the engine applies);
`--json` prints `{"ok", "message"}`. Exit codes a script can branch on:
0 done, 1 refused (the reason on stderr), 2 bad input, 4 no engine runs
(`itera-tui engine start` starts one), 6 the engine is busy (it takes no more
connections now: asked again for a few seconds first; try again later).
`itera-tui engine start|stop|status` handles the engine itself; `attach --stdio`
is the bridge for ssh.
"""

from __future__ import annotations

import json
import sys
import time

from ..session.snapshot import ActionResult
from .client import EngineBusy, EngineUnavailable

EXIT_REFUSED = 1
EXIT_NO_ENGINE = 4
EXIT_BUSY = 6  # not 5: that is "ledger unwritable" wherever the engine runs


def _say(result: ActionResult, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"ok": result.ok, "message": result.message}))
    elif result.ok:
        print(result.message)
    else:
        print(f"itera-tui: {result.message}", file=sys.stderr)
    return 0 if result.ok else EXIT_REFUSED


def _client(plan, snapshots: bool = False):
    from .starter import connect

    return connect(plan, start=False, name="cli", snapshots=snapshots, history=0)


def _no_engine(exc: EngineUnavailable, as_json: bool) -> int:
    if isinstance(exc, EngineBusy):
        text = f"{exc}; nothing was sent"
        if as_json:
            print(json.dumps({"ok": False, "message": text, "busy": True}))
        else:
            print(f"itera-tui: {text}", file=sys.stderr)
        return EXIT_BUSY
    text = (f"{exc}; start it with `itera-tui engine start` (or `itera-tui`, which opens "
            "the room too)")
    if as_json:
        print(json.dumps({"ok": False, "message": text, "engine": None}))
    else:
        print(f"itera-tui: {text}", file=sys.stderr)
    return EXIT_NO_ENGINE


def act(plan, action: str, *, run: str | None = None, reason: str | None = None,
        variants: list[str] | None = None, decision: str | None = None,
        yes: bool = False, as_json: bool = False) -> int:
    """One action against the running engine."""
    try:
        client = _client(plan, snapshots=action in ("drop", "stop"))
    except EngineUnavailable as exc:
        return _no_engine(exc, as_json)
    try:
        if action == "checkpoint":
            result = client.checkpoint(run)
        elif action == "stop":
            result = _stop(plan, client, run, reason, yes)
        elif action == "drop":
            pending = client.replayed().state.decision_pending is not None
            result = client.drop_many(variants, at_decision=pending)
        elif action == "decide":
            result = client.decide(decision)
        elif action in ("pause", "resume"):
            result = client.pause(action == "pause")
        else:
            raise ValueError(action)
        return _say(result, as_json)
    finally:
        client.close()


def _stop(plan, client, run: str, reason: str, yes: bool) -> ActionResult:
    """A stop that costs the conclusion (a mandatory run, the last challenger) says so and
    needs --yes: the room's confirm, in its words."""
    from ..engine.conclusion.verdict import last_challenger_warning
    from ..session.refusals import stop_loss

    state = client.replayed().state
    found = next((r for r in state.runs if r.id == run), None)
    loss = stop_loss(plan, found, found.id) if found is not None else None
    if loss is None and found is not None and found.kind == "run":
        loss = last_challenger_warning(plan, state, [found.target])
    if loss is not None and not yes:
        return ActionResult(False, f"{loss} Pass --yes to stop it anyway.")
    return client.stop(run, reason)


def wrapup(plan, as_json: bool = False) -> int | None:
    """Ask the running engine to wrap up and follow it; None when no engine runs (the
    caller builds the bundle itself, as before)."""
    try:
        client = _client(plan, snapshots=True)
    except EngineBusy as exc:  # an engine runs: never wrap up beside it
        return _no_engine(exc, as_json)
    except EngineUnavailable:
        return None
    try:
        def line(text: str) -> None:
            if not as_json:
                print(f"[{time.strftime('%H:%M:%S')}] {text}", flush=True)

        result = client.start_wrapup(line)
        if not result.ok and "already running" not in result.message:
            return _say(result, as_json)
        progress = client.wait_wrapup()
        if as_json:
            wrap = client.replayed().state.wrapup
            print(json.dumps(wrap.to_dict() if wrap else None, indent=2))
        elif progress.text:
            print(f"itera-tui: {progress.text}", file=sys.stderr if not progress.ok
                  else sys.stdout)
        return 0 if progress.ok else EXIT_REFUSED
    finally:
        client.close()


def engine_command(plan, what: str, as_json: bool = False) -> int:
    """`itera-tui engine start|stop|status`."""
    from .paths import socket_path
    from .starter import connect

    if what == "start":
        try:
            client = connect(plan, start=True, name="cli", snapshots=False, history=0)
        except EngineUnavailable as exc:
            print(f"itera-tui: {exc}", file=sys.stderr)
            return EXIT_BUSY if isinstance(exc, EngineBusy) else EXIT_NO_ENGINE
        pid = client.engine_pid
        client.close()
        print(f"the engine (pid {pid}) drives {plan.campaign.name}; `itera-tui` opens the "
              "room, `itera-tui engine stop` stops it")
        return 0
    try:
        client = _client(plan)
    except EngineUnavailable as exc:
        if what == "status" and not isinstance(exc, EngineBusy):
            print(json.dumps({"running": False}) if as_json else f"no engine: {exc}")
            return EXIT_NO_ENGINE
        return _no_engine(exc, as_json)
    try:
        if what == "status":
            hello = client.hello or {}
            if as_json:
                print(json.dumps({"running": True, "pid": hello.get("engine_pid"),
                                  "events": hello.get("events"),
                                  "socket": str(socket_path(plan.state_dir).name)}))
            else:
                print(f"the engine (pid {hello.get('engine_pid')}) drives "
                      f"{plan.campaign.name}; {hello.get('events')} ledger events")
            return 0
        result = client.shutdown()
        if result.ok:
            _wait_gone(plan)
        return _say(result, as_json)
    finally:
        client.close()


def _wait_gone(plan, timeout: float = 30.0) -> None:
    from .starter import engine_listening

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and engine_listening(plan.state_dir):
        time.sleep(0.2)


def attach_stdio(plan, start: bool) -> int:
    from .bridge import bridge
    from .paths import socket_path

    if start:
        from .starter import connect

        try:
            connect(plan, start=True, name="bridge", snapshots=False, history=0).close()
        except EngineUnavailable:
            pass  # the bridge answers the protocol's own error line
    return bridge(socket_path(plan.state_dir))
