"""Find the campaign's engine, or start it detached, and connect a client to it.

`itera-tui` (the room), the CLI actions and the ssh bridge all come through
here: connect to the socket when an engine listens; otherwise, unless told
not to, start the supervisor in its own session (double-forked, so it is
nobody's child and no terminal's), and wait until its socket answers. An
engine that cannot start says why from the last lines of `.itera/engine.log`.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from .client import EngineBusy, EngineClient, EngineUnavailable, unix_transport
from .paths import engine_log, socket_path

START_TIMEOUT_S = 60.0  # imports and the ledger's replay, on a loaded box
HELD_GRACE_S = 20.0  # the lock is someone else's: an engine opening, or one that never serves


def engine_listening(state_dir: Path) -> bool:
    """True when an engine answers on the campaign's socket (a hello, nothing more)."""
    try:
        client = EngineClient(unix_transport(socket_path(state_dir)), name="probe",
                              reconnect=False, snapshots=False)
        client.open(history=0)
    except EngineBusy:
        return True  # it answered: busy is listening
    except EngineUnavailable:
        return False
    client.close()
    return True


def _log_size(state_dir: Path) -> int:
    try:
        return engine_log(state_dir).stat().st_size
    except OSError:
        return 0


def _log_tail(state_dir: Path, since: int = 0, lines: int = 6) -> str:
    """The engine log's last lines written after byte `since`, safe for a terminal."""
    try:
        with open(engine_log(state_dir), "rb") as f:
            f.seek(0, 2)
            f.seek(max(since, f.tell() - 8192))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join("".join(c if c.isprintable() else "?" for c in line)
                     for line in text.splitlines()[-lines:])


def start_detached(campaign: Path, state_dir: Path) -> None:
    """Start the supervisor (which starts the engine) with no terminal; returns at once."""
    from ..engine.checkpoints.verifier_process import fresh_env

    state_dir.mkdir(parents=True, exist_ok=True)
    with open(engine_log(state_dir), "ab") as log:
        intermediate = subprocess.Popen(
            [sys.executable, "-m", "tui.service.daemon", "supervise", "--detach",
             str(Path(campaign).absolute())],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            cwd=str(Path(campaign).absolute().parent), env=fresh_env(),
            start_new_session=True, close_fds=True)
    intermediate.wait(30)  # it forks the supervisor and returns at once


def connect(plan, *, start: bool = True, name: str = "room",
            timeout: float = START_TIMEOUT_S, snapshots: bool = True,
            history: int = 300, go_without: bool = False) -> EngineClient:
    """A client of the campaign's engine, starting the engine first if none runs and
    `start`; EngineUnavailable, in words, when none can be had; PlanError (`check`'s
    own lines) before starting a campaign `check` refuses. `go_without`: a `[store]`
    that cannot be written is not refused, the campaign runs without it."""
    state_dir = plan.state_dir
    path = socket_path(state_dir)

    def attempt() -> EngineClient:
        client = EngineClient(unix_transport(path), name=name, snapshots=snapshots)
        client.restart_engine = lambda: _restart(plan)
        return client.open(history=history)

    try:
        return attempt()
    except EngineBusy:
        raise  # an engine runs: never start another because it is busy
    except EngineUnavailable:
        if not start:
            raise
    since = _log_size(state_dir)
    started = _lock_free(state_dir)
    if started:  # else an engine is starting (or a headless run binds its socket): wait
        from ..campaign.preflight import refuse_sure_failures

        refuse_sure_failures(plan)  # what `check` refuses is never frozen nor started
        if plan.store is not None:  # nor one whose store it cannot write (unless told
            from ..store.claim import refuse_unusable_store  # to go on without), nor on

            refuse_unusable_store(plan, go_without)  # another campaign's store prefix
        start_detached(plan.path, state_dir)
    deadline = time.monotonic() + (timeout if started else min(timeout, HELD_GRACE_S))
    last = None
    while time.monotonic() < deadline:
        try:
            return attempt()
        except EngineUnavailable as exc:
            last = exc
        if _engine_gave_up(state_dir, since):
            break
        time.sleep(0.2)
    if not started:
        raise EngineUnavailable(
            f"another itera-tui (pid {_lock_holder(state_dir)}) holds this campaign's engine "
            "lock but answers on no socket (an older itera-tui, or a process stuck opening "
            "the ledger); `itera-tui status` reads the ledger meanwhile")
    tail = _log_tail(state_dir, since)
    raise EngineUnavailable("the engine did not start" + (f" ({last})" if last else "")
                            + (f"; .itera/engine.log ends with:\n{tail}" if tail else ""))


def _restart(plan) -> None:
    if not _lock_free(plan.state_dir):
        raise EngineUnavailable("another engine holds the campaign (it may be starting)")
    start_detached(plan.path, plan.state_dir)


def _lock_free(state_dir: Path) -> bool:
    """Nobody holds the engine lock (so no engine is starting or running)."""
    from ..engine.errors import CampaignDriven
    from ..engine.lock import take_engine_lock

    try:
        f = take_engine_lock(state_dir)
    except CampaignDriven:
        return False
    except OSError:
        return True
    f.close()
    return True


def _lock_holder(state_dir: Path) -> str:
    try:
        return (state_dir / "engine.lock").read_text().strip() or "?"
    except OSError:
        return "?"


def _engine_gave_up(state_dir: Path, since: int) -> bool:
    tail = _log_tail(state_dir, since, 3)
    return "the supervisor ends" in tail or "giving up" in tail
