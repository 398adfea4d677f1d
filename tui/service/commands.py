"""The command line as a client of the engine process: act, stop it, bridge it.

`itera-tui checkpoint|stop|drop|decide|pause|resume|wrapup` send one action
to the campaign's engine and print its answer, in the same words the room
shows (the refusals live in the session layer, which the engine applies);
`--json` prints `{"ok", "message"}`. Exit codes a script can branch on:
0 done, 1 refused (the reason on stderr), 2 bad input, 4 no engine runs
(`itera-tui engine start` starts one), 6 the engine is busy (it takes no more
connections now: asked again for a few seconds first; try again later), 7
(`wrapup`, as `run --headless`) the bundle verified here but its delivery to the
store failed.
`itera-tui engine start|stop|status` handles the engine itself; `attach --stdio`
is the bridge for ssh.
"""

from __future__ import annotations

import json
import re
import sys
import time

from ..engine.decision.answer import Decision
from ..session.snapshot import ActionResult
from .client import EngineBusy, EngineUnavailable

EXIT_REFUSED = 1
EXIT_BAD_INPUT = 2
EXIT_NO_ENGINE = 4
EXIT_BUSY = 6  # not 5: that is "ledger unwritable" wherever the engine runs
EXIT_NOT_DELIVERED = 7  # `wrapup`, `run --headless`: the bundle verified here, its
# delivery to the [store] failed (the bundle is fine: not a failed wrap-up)


def said_undelivered(plan, stored, wrap) -> bool:
    """Whether a done wrap-up's verified bundle failed its delivery to the store
    (`stored`: the mirror's MirrorStatus, `wrap`: the ledger's wrap-up); if so, said
    on stderr: the bundle is fine here, why the delivery failed, and the command
    that fetches it from this box."""
    from ..campaign.retrieval import Origin, retrieval_command

    bundle = getattr(stored, "bundle", None)
    if bundle is None or bundle.verified or wrap is None or not wrap.verified \
            or not wrap.bundle:
        return False
    print(f"itera-tui: bundle verified here ({wrap.bundle}); delivery to the store "
          f"failed: {bundle.why_not}; fetch it from this box with "
          f"{retrieval_command(plan, wrap.bundle, Origin.here(plan))}",
          file=sys.stderr, flush=True)
    return True


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
        variants: list[str] | None = None, decision: Decision | None = None,
        yes: bool = False, as_json: bool = False) -> int:
    """One action against the running engine. `decide` at a decision point nobody
    drives (a headless run exits there) starts the engine first, so the command the
    decision notice names works in both states."""
    try:
        client = _client(plan, snapshots=action in ("drop", "stop", "checkpoint"))
    except EngineUnavailable as exc:
        if action != "decide" or not _waits_for_a_decision(plan):
            return _no_engine(exc, as_json)
        from .starter import connect

        try:
            # the campaign started before its decision point: its store is not asked
            # again (a `--without-store` start is kept in .itera/without-store)
            client = connect(plan, start=True, name="cli", snapshots=False, history=0)
        except EngineUnavailable as why:
            return _no_engine(why, as_json)
        if not as_json:
            print(f"started the engine (pid {client.engine_pid}) to carry on from the "
                  "decision point; `itera-tui` opens the room on it", file=sys.stderr)
    try:
        if action in ("checkpoint", "stop"):
            run, problem = resolve_run(client.replayed().state, run)
            if problem is not None:  # bad input: the ids it could be, exit 2
                if as_json:
                    print(json.dumps({"ok": False, "message": problem}))
                else:
                    print(f"itera-tui: {problem}", file=sys.stderr)
                return EXIT_BAD_INPUT
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


def resolve_run(state, name: str) -> tuple[str | None, str | None]:
    """The run id a person means: a run id (`itera-tui status`), the room's label
    (`control·run`, `control·run#2`, also with a `.`), or a variant or step id when
    one run of it is running (or it has only one run); else None and why, naming the
    ids it could be."""
    runs = list(state.runs)
    if any(r.id == name for r in runs):
        return name, None
    label = re.fullmatch(r"(.+?)[·.](pilot|run)(?:#(\d+))?", name)
    if label:
        target, kind, attempt = label.group(1), label.group(2), int(label.group(3) or 1)
        found = [r for r in runs if r.target == target and r.kind == kind
                 and r.attempt == attempt]
    else:
        found = [r for r in runs if r.target == name]
        running = [r for r in found if r.state == "running"]
        found = running if running else found
    if len(found) == 1:
        return found[0].id, None
    shown = found or ([r for r in runs if r.state == "running"] or runs)
    ids = ", ".join(f"{r.id} ({_label(r)}, {r.state})" for r in shown[-12:]) or "none yet"
    what = "more than one run" if found else "no run"
    return None, f"{what} {name!r}: give one of {ids}"


def _label(run) -> str:
    from ..engine.views import run_label

    return run_label(run.kind, run.target, run.attempt)


def _waits_for_a_decision(plan) -> bool:
    """The ledger says the campaign stands at a decision point (read-only)."""
    from ..engine.ledger.file import read_ledger_report
    from ..engine.ledger.state import replay

    ledger = plan.state_dir / "ledger.jsonl"
    if not ledger.is_file():
        return False
    state = replay(read_ledger_report(ledger, plan.state_dir / "runs").events)
    return state.decision_pending is not None


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
        def line(t: float, text: str) -> None:  # the time the engine said it
            if not as_json:
                print(f"[{time.strftime('%H:%M:%S', time.localtime(t))}] {text}", flush=True)

        snap = client.replayed()
        before = snap.wrapup  # a wrap-up that ended before is not this one
        from ..engine.conclusion.verdict import wrapup_warning

        loss = None if before.running else wrapup_warning(plan, snap.state)
        if loss and not as_json:  # the room's `w` confirm says it too
            print(f"itera-tui: warning: {loss}", file=sys.stderr, flush=True)
        result = client.start_wrapup()
        if not result.ok and "already running" not in result.message:
            return _say(result, as_json)
        progress = client.follow_wrapup(before, line)
        if progress.ok is None:  # the link ended before the wrap-up did
            print("itera-tui: the engine went before the wrap-up ended; `itera-tui status` "
                  "says where it stands", file=sys.stderr)
            return EXIT_REFUSED
        snap = client.replayed()
        if as_json:
            wrap = snap.state.wrapup
            print(json.dumps(wrap.to_dict() if wrap else None, indent=2))
        elif progress.text:
            print(f"itera-tui: {progress.text}", file=sys.stderr if not progress.ok
                  else sys.stdout)
        if not progress.ok:
            return EXIT_REFUSED
        return EXIT_NOT_DELIVERED if said_undelivered(plan, snap.store, snap.state.wrapup) \
            else 0
    finally:
        client.close()


def engine_command(plan, what: str, as_json: bool = False,
                   without_store: bool = False) -> int:
    """`itera-tui engine start|stop|status` (`without_store`: start without `[store]`)."""
    from .lifetime import engine_doing
    from .paths import socket_path
    from .starter import connect

    if what == "start":
        try:
            client = connect(plan, start=True, name="cli", snapshots=False, history=0,
                             go_without=without_store)
        except EngineUnavailable as exc:
            print(f"itera-tui: {exc}", file=sys.stderr)
            return EXIT_BUSY if isinstance(exc, EngineBusy) else EXIT_NO_ENGINE
        pid, finished = client.engine_pid, (client.hello or {}).get("finished", False)
        client.close()
        print(f"{engine_doing(pid, plan.campaign.name, finished)}; `itera-tui` opens the "
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
                                  "finished": hello.get("finished", False),
                                  "socket": str(socket_path(plan.state_dir).name)}))
            else:
                doing = engine_doing(hello.get("engine_pid"), plan.campaign.name,
                                     hello.get("finished", False))
                print(f"{doing}; {hello.get('events')} ledger events")
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
        from ..campaign.validate import PlanError
        from .bridge import refuse
        from .starter import connect

        try:
            connect(plan, start=True, name="bridge", snapshots=False, history=0).close()
        except EngineUnavailable:
            pass  # the bridge answers the protocol's own error line
        except PlanError as exc:  # the far room says it in `check`'s words, exit 2
            refuse("\n".join(exc.problems))
            return 2
    return bridge(socket_path(plan.state_dir))
