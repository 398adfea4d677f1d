"""A campaign that continues on another box: the move request and its ledger event.

`itera-tui resume URL` (tui/service/resume.py) fetches the frozen plan, the
ledger and the verified checkpoints from the store into a fresh folder, checks
every object, and leaves `.itera/move.json`: the new box's rental (its window
and price, or a new `[[lot]]`), the one plan change a move may make. The
engine that opens the folder next records it once as `campaign_moved` before
anything else reads the runs: the state builder marks every run still live in
the ledger as cut (its box is gone), the window becomes the new box's, and the
same replay and adoption that follow a crash take it from there: completed runs
stay completed, the scheduler continues each cut run from its last verified
checkpoint (`scheduler.continuation`). Nothing here runs a process.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from .errors import EngineError
from .ledger.journal import Journal
from .ledger.events import CampaignMoved, EngineStarted, Event, RunProgress, WarningEvent

MOVE_FILE = "move.json"


@dataclass(frozen=True)
class MoveRequest:
    """What `resume` asks of the engine that opens the fetched folder."""
    store: str  # the store URL, as the person gave it (credentials are never in it)
    window_hours: float
    price_usd: float
    lot: str | None = None  # the `[[lot]]` given for the new box, if one was
    checkpoints: tuple[tuple[str, str], ...] = ()  # run -> verified checkpoint fetched
    # run -> why: completed on the old box, but the store cannot prove it finished whole
    # (its exit's results not all in the store's index): cut, run again, never kept half
    rerun: tuple[tuple[str, str], ...] = ()
    undelivered: str | None = None  # wrapped up there, its bundle not at the store: why

    def __post_init__(self):
        for name in ("window_hours", "price_usd"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise EngineError(f"move: {name} must be a finite number >= 0, got {value!r}")
        if self.window_hours <= 0:
            raise EngineError("move: the new box's window must be longer than 0 hours")

    def write(self, state_dir: Path) -> None:
        path = Path(state_dir) / MOVE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def read(cls, state_dir: Path) -> "MoveRequest | None":
        path = Path(state_dir) / MOVE_FILE
        try:
            data = json.loads(path.read_text())
            return cls(str(data["store"]), float(data["window_hours"]),
                       float(data["price_usd"]), data.get("lot"),
                       tuple((str(r), str(p)) for r, p in data.get("checkpoints") or ()),
                       tuple((str(r), str(w)) for r, w in data.get("rerun") or ()),
                       data.get("undelivered"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise EngineError(f".itera/{MOVE_FILE} cannot be read ({exc}); run "
                              "`itera-tui resume` again") from None


def apply_move(journal: Journal, state_dir: Path, events: list[Event], host: str,
               reach: Callable[[str], int | None] | None = None) -> None:
    """Record a pending move once, then drop its request (a crash in between leaves the
    request, and the ledger already says the move: it is not recorded twice). `reach`:
    the highest step of a run's records as the store kept them (`stored_reach`)."""
    request = MoveRequest.read(state_dir)
    if request is None:
        return
    already = any(isinstance(ev, CampaignMoved) and ev.store == request.store
                  and ev.seq > _last_engine_seq(events) for ev in events)
    if not already:
        for run in journal.state.running if reach is not None else ():
            # the records stored with its last save may go past its last mark in the
            # ledger (marks come every few minutes): the floor of how far it got
            step = reach(run.id)
            if step is not None and (run.reached_step is None or step > run.reached_step):
                journal.record(RunProgress(run=run.id, step=step))
        state = journal.state
        last_t = max((float(ev.t) for ev in events), default=None)
        completed = {r.id for r in state.runs if r.state == "completed"}
        rerun = [(r, why) for r, why in request.rerun if r in completed]
        journal.record(CampaignMoved(store=request.store, from_host=state.host, host=host,
                       cut=[r.id for r in state.running] + [r for r, _ in rerun],
                       last_t=last_t, window_hours=request.window_hours,
                       price_usd=request.price_usd, lot=request.lot,
                       checkpoints=dict(request.checkpoints)))
        for rid, why in rerun:
            journal.record(WarningEvent(run=rid, message=(
                f"{rid} completed on the old box, but the store cannot prove it finished "
                f"whole ({why}): it runs again here from the start, never kept half")))
        if request.undelivered:
            journal.record(WarningEvent(message=(
                "the campaign was wrapped up on the old box, but its bundle is not at the "
                f"store ({request.undelivered}): the wrap-up is done again here from what "
                "the store holds, and the bundle delivered")))
    (Path(state_dir) / MOVE_FILE).unlink(missing_ok=True)


def stored_reach(run_dir: Path, metrics) -> int | None:
    """The highest global step in a run's records as `resume` laid them back from the
    store (its records and logs, stored with each verified checkpoint): what a run whose
    box died without a word is known to have reached, at least. Read once, lazily."""
    from .reading.feeds import recorded_sources

    best = None
    for records in recorded_sources(run_dir, metrics):
        for record in records:
            step = record.get("global_step", record.get("step"))
            if step.__class__ is int and (best is None or step > best):
                best = step
    return best


def _last_engine_seq(events: list[Event]) -> int:
    """The seq of the last engine that started before this one: a move recorded after it
    is this request's (a crash after the record, before the request was removed)."""
    starts = [ev.seq for ev in events if isinstance(ev, EngineStarted)]
    return starts[-1] if starts else 0


# the start's choice to go on without `[store]` (tui.store.claim writes it), and the
# mirror's last status (tui.store.status): read here, below the store's layer
WITHOUT_STORE_FILE = "without-store"
STORE_STATUS_FILE = "store.json"


def how_to_continue(plan) -> str:
    """After the box announced its end: the commands that carry the campaign on, true
    for this plan (a new box needs the store: without `[store]`, or with one that holds
    nothing of this campaign, there is nothing to resume from). The store's URL is the
    one written in `[store]`: it holds no secret."""
    if getattr(plan, "store", None) is not None:
        empty = _store_holds_nothing(plan)
        if empty is None:
            from ..campaign.retrieval import store_resume_command

            return (f"`{store_resume_command(plan)}` on a new box (DIR a fresh folder; "
                    "--lot as the new box is rented), or `itera-tui` here after a reboot")
        return (f"`itera-tui` here after a reboot (not on a new box: {empty}, so nothing of "
                "the campaign is kept off this one)")
    return ("`itera-tui` here after a reboot (not on a new box: without [store] nothing "
            "of the campaign is kept off this one)")


def _store_holds_nothing(plan) -> str | None:
    """Why `[store]` holds nothing of this campaign, in words, or None when its mirror
    stored some of its ledger (the mirror's last status, `.itera/store.json`: stdlib
    only, so the engine imports no store code for it)."""
    state_dir = getattr(plan, "state_dir", None)
    if state_dir is None:
        return None
    url = plan.store.url
    if (Path(state_dir) / WITHOUT_STORE_FILE).is_file():
        return f"it was started with --without-store, {url} holds nothing of it"
    try:
        stored = json.loads((Path(state_dir) / STORE_STATUS_FILE).read_text()).get(
            "ledger_stored")
    except (OSError, ValueError, AttributeError):
        stored = None
    if not isinstance(stored, int) or stored <= 0:
        return f"the store {url} holds nothing of it (never written)"
    return None
