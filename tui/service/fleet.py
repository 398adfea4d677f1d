"""One room over every box of a campaign: this box's engine and each other box's.

A campaign of lots on several hosts runs one engine per box, each for its share
(`tui.campaign.boxes`). The room on the first box is built against one
`SessionSource`; `FleetSource` is that source over several clients: this box's
(its socket) and one per other box (`ssh HOST itera-tui attach --stdio DIR`,
`tui.service.remote`). Each box keeps its own rules, runs and ledger; what the
room sees is their union:

- the runs of every box in one state (run ids name their variant, and a variant
  runs on one box only), the live views of every box, the events of every box,
  each far one tagged with its box (`ev["box"]`, shown before the line);
- a box whose link is down makes the snapshot's link "LINK LOST ... on HOST"
  while its last known runs stay on screen; it catches up by itself;
- an action on a run goes to the box that runs it; a decision, a pause and a
  drop go to every box (each answers for its share); the wrap-up is this box's,
  which pulls and merges every other box's part (`tui.bundle.merge`).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Callable

from ..engine.decision.answer import Decision
from ..engine.ledger.events import Event
from ..session.snapshot import ActionResult, WrapupProgress


class FleetSource:
    def __init__(self, home, others: dict[str, object]):
        """`home`: this box's client; `others`: box name -> that box's client."""
        self.home = home
        self.others = dict(others)
        self.plan = home.plan
        self._lock = threading.Lock()

    # -- the union -------------------------------------------------------------------
    def _snapshots(self):
        """Each other box's last snapshot, at once (None: none yet); never waits on a link."""
        return {box: client.peek() for box, client in self.others.items()}

    def step(self, tick: bool = True, sample: bool = True):
        return self._merged(self.home.step())

    def replayed(self):
        return self._merged(self.home.replayed())

    def _merged(self, snap):
        runs = list(snap.state.runs)
        live = dict(snap.engine.live)
        seen = {r.id for r in runs}
        lost = snap.link if snap.link is not None and snap.link.lost else None
        pending = snap.state.decision_pending
        waiting = [pending is not None or snap.state.decided is not None]
        running_elsewhere = False
        for box, far in self._snapshots().items():
            client = self.others[box]
            if client.link.lost and lost is None:
                lost = client.link
            if far is None:
                continue
            for run in far.state.runs:
                if run.id not in seen:
                    runs.append(run)
                    seen.add(run.id)
            live.update({rid: v for rid, v in far.engine.live.items() if rid not in live})
            if pending is None and far.state.decision_pending is not None:
                pending = far.state.decision_pending
            waiting.append(far.state.decision_pending is not None
                           or far.state.decided is not None)
            running_elsewhere = running_elsewhere or bool(far.state.running)
        if not all(waiting):
            pending = None  # the decision point waits for every box's pilots
        state = replace(snap.state, runs=tuple(runs), decision_pending=pending)
        engine = replace(snap.engine, state=state, live=live,
                         finished=snap.engine.finished and not running_elsewhere)
        return replace(snap, engine=engine, link=lost or snap.link)

    def history(self, limit: int) -> list[Event]:
        events = list(self.home.history(limit))
        for box, client in self.others.items():
            events += [ev.on_box(box) for ev in client.history(limit)]
        events.sort(key=lambda ev: ev.t)
        return events[-limit:]

    def subscribe(self, listener: Callable[[Event], None]) -> None:
        self.home.subscribe(listener)
        for box, client in self.others.items():
            client.subscribe(lambda ev, box=box: listener(ev.on_box(box)))

    def on_snapshot(self, callback: Callable[[], None]) -> bool:
        """A push from any box is a new union to draw; pushes only if every box does."""
        pushed = [client.on_snapshot(callback) for client in (self.home, *self.others.values())]
        return all(pushed)

    # -- actions, routed ----------------------------------------------------------------
    def _client_of_run(self, run_id: str):
        for client in self.others.values():
            snap = client.peek()
            if snap is not None and any(r.id == run_id for r in snap.state.runs):
                return client
        return self.home

    def checkpoint(self, run_id: str) -> ActionResult:
        return self._client_of_run(run_id).checkpoint(run_id)

    def stop(self, run_id: str, reason: str) -> ActionResult:
        return self._client_of_run(run_id).stop(run_id, reason)

    def _everywhere(self, act) -> ActionResult:
        results = [(None, act(self.home))]
        results += [(box, act(client)) for box, client in self.others.items()]
        bad = [(box, r) for box, r in results if not r.ok]
        if len(bad) == len(results):
            return bad[0][1]
        said = "; ".join(f"{box}: {r.message}" if box else r.message for box, r in results)
        return ActionResult(not bad, said)

    def drop(self, variant_id: str, at_decision: bool = False) -> ActionResult:
        return self.drop_many([variant_id], at_decision)

    def drop_many(self, variant_ids, at_decision: bool = False) -> ActionResult:
        ids = list(variant_ids)
        return self._everywhere(lambda c: c.drop_many(ids, at_decision))

    def pause(self, paused: bool) -> ActionResult:
        return self._everywhere(lambda c: c.pause(paused))

    def decide(self, decision: Decision) -> ActionResult:
        """The decision point waits for every box's pilots; the answer goes to each box."""
        return self._everywhere(lambda c: c.decide(decision))

    def start_wrapup(self, on_line=None) -> ActionResult:
        return self.home.start_wrapup(on_line)

    def wrapup_progress(self) -> WrapupProgress:
        return self.home.wrapup_progress()

    def wait_wrapup(self, timeout: float | None = None) -> WrapupProgress:
        return self.home.wait_wrapup(timeout)

    @property
    def wrapup_running(self) -> bool:
        return self.home.wrapup_running

    @property
    def engine_pid(self):
        return self.home.engine_pid

    def start_engine(self) -> ActionResult:
        return self.home.start_engine()

    def close(self) -> None:
        for client in (self.home, *self.others.values()):
            client.close()


def open_fleet(plan, home) -> "FleetSource | object":
    """The room's source for `plan`: `home` alone on a one-box campaign, else a fleet of
    `home` and a client per other box (followed through ssh, reaching it when it can)."""
    from ..campaign.boxes import box_shares, is_multi_box
    if not is_multi_box(plan):
        return home
    from .client import EngineClient, pipe_transport
    from .remote import bridge_argv  # ssh to the other boxes: not a one-box room's start

    others = {}
    for share in box_shares(plan):
        if not share.remote:
            continue
        client = EngineClient(pipe_transport(bridge_argv(share.host.text, share.dir,
                                                         share.python)),
                              name="room", where=share.box, backoff=(1.0, 2.0, 4.0, 8.0))
        others[share.box] = client.open_later(plan)
    return FleetSource(home, others)
