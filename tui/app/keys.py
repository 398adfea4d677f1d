"""What each key does: checkpoint, drop, wrap up, stop, pause, quit, decide, open a run.

A plain object the App holds (no mixin): it sees the room only through the
App's public surface (the current snapshot, the selected row, notify,
push_screen) and the session's actions. Destructive keys (drop, wrap up,
stop) go through a confirm modal first, and say what they cost (stopping a
mandatory run); a key that cannot work says why instead of pretending
(`c` on a run that has no way to checkpoint). The session call runs in a
worker (it writes fsync'ed ledger lines), and a refusal comes back in the
session's own words.
"""

from __future__ import annotations

from .messages import Notice
from ..engine.conclusion.verdict import last_challenger_warning, wrapup_warning
from ..engine.decision.answer import CONTINUE, WRAPUP
from ..session.refusals import stop_loss
from . import screens

OVER_ACTIONS = frozenset({"checkpoint", "drop", "wrapup", "stop", "pause", "decision"})


def campaign_over(room) -> bool:
    """The room's last view says the campaign is finished and wrapped up: its engine
    only answers (what `q` leaves on the terminal and the help's `q` line say)."""
    from ..service.lifetime import nothing_left

    return room is not None and nothing_left(room.engine.finished, room.wrapup.running,
                                             room.state.wrapup)


def key_applies(action: str, room) -> bool:
    """Whether a key still means something for this snapshot (the footer hides it if not)."""
    if action in OVER_ACTIONS and room is not None and room.phase == "done":
        return False  # the bundle is verified: nothing is left to act on
    if action == "decision":
        return bool(room and room.state.decision_pending is not None)
    if action == "start_engine":  # only while the engine's link is down
        return bool(room and room.link is not None and room.link.lost)
    if action == "ending":
        return bool(room and room.ending is not None)
    return True


def keys_changed(old, room) -> bool:
    """Whether the footer must be redrawn: a decision came or went, or the phase moved."""
    if old is None:
        return True
    lost = lambda snap: snap.link is not None and snap.link.lost  # noqa: E731
    return ((old.state.decision_pending is None) != (room.state.decision_pending is None)
            or (old.phase, old.ending is None) != (room.phase, room.ending is None)
            or lost(old) != lost(room))


def live_runs_stopped(room, ids) -> str:
    """What a drop does to the runs of those variants now alive, in words (nothing is
    said of runs that have already ended: a drop stops only live ones)."""
    state = getattr(room, "state", None)
    alive = [r for r in (state.runs if state is not None else ()) if r.alive
             and r.target in ids]
    if not alive:
        return ""
    from ..engine.views import run_label

    labels = ", ".join(run_label(r.kind, r.target, r.attempt) for r in alive)
    return f"; {labels}, running now, {'is' if len(alive) == 1 else 'are'} stopped"


class RoomKeys:
    def __init__(self, app, session):
        self.app = app
        self.session = session
        self.awaiting_checkpoint: set[str] = set()  # their verification is worth a toast
        self.decision_shown_t: float | None = None

    # -- running session actions off the UI thread ---------------------------
    def act(self, label: str, fn, then=None, refused=None) -> None:
        """Run `fn` off the UI thread; its result is a notice. `refused(message)`, on the
        UI thread, when the session refused it (the drop picker reopens with the words)."""
        def work():
            try:
                result = fn()
            except Exception as exc:  # never a traceback in the room
                self.app.post_message(Notice(f"{type(exc).__name__}: {exc}", "error",
                                             f"{label} failed"))
                return
            self.app.post_message(Notice(result.message, "information" if result.ok
                                         else "error", label if result.ok
                                         else f"{label} refused"))
            if result.ok and then is not None:
                then()
            if not result.ok and refused is not None:
                try:
                    self.app.call_from_thread(refused, result.message)
                except RuntimeError:  # the app is closing
                    pass
            self.app.pump.request(urgent=True)

        self.app.run_worker(work, thread=True, group="action", exit_on_error=False)

    def _selected_alive(self, verb: str):
        row = self.app.selected_row()
        if row is None or not row.alive or row.run_id is None:
            self.app.notify(f"select a running run to {verb} (↑/↓)", severity="warning")
            return None
        return row

    def _drop_choices(self, marks: dict[str, str]) -> list["screens.DropChoice"]:
        room = self.app.room
        dropped = room.state.dropped if room else frozenset()
        return [screens.DropChoice(v.id, v.category, marks.get(v.id))
                for v in self.app.plan.variants if v.id not in dropped]

    # -- keys --------------------------------------------------------------------
    def checkpoint(self) -> None:
        row = self._selected_alive("checkpoint")
        if row is None:
            return
        rid = row.run_id

        def request():  # refused, with why, in the session's words (every face's)
            result = self.session.checkpoint(rid)
            if result.ok:
                self.awaiting_checkpoint.add(rid)
            return result

        self.act("checkpoint", request)

    def drop(self, at_decision: bool = False, refusal: str | None = None) -> None:
        marks = {}
        pending = self.app.room.state.decision_pending if self.app.room else None
        if pending is not None:
            from .pilot_figures import pilot_rows  # only at a decision: off the first paint

            marks = {r.variant: r.mark for r in pilot_rows(self.app.plan, pending,
                                                            self.app.room) if r.mark}
        choices = self._drop_choices(marks)
        if not choices:
            self.app.notify("no variant left to drop", severity="warning")
            return
        title = "Decision: drop which variants?" if at_decision else "Drop which variants?"
        self.app.push_screen(screens.DropScreen(choices, title, premark=at_decision,
                                                note=refusal),
                             lambda ids: self._drop_picked(ids, at_decision))

    def _drop_picked(self, ids: list[str] | None, at_decision: bool) -> None:
        if not ids:
            return
        plan = self.app.plan
        def action():
            return self.session.drop_many(ids, at_decision)
        if any(not plan.variant(v).optional for v in ids):  # refused, in the session's words
            self.act("drop", action, refused=lambda message: self.drop(at_decision, message))
            return
        names = ", ".join(ids)
        last = last_challenger_warning(plan, self.app.room.state, ids) if self.app.room \
            else None
        self.app.push_screen(screens.ConfirmScreen(
            f"Drop {names}?",
            f"{names} will not run{live_runs_stopped(self.app.room, ids)}. The "
            "decision is recorded in the ledger; the initial plan is kept as planned."
            + (f" {last}" if last else ""), yes="drop"),
            lambda yes: yes and self.act("drop", action))

    def stop(self) -> None:
        row = self._selected_alive("stop")
        if row is None:
            return
        loss, title = stop_loss(self.app.plan, row), f"Stop {row.label}? It is mandatory"
        if loss is None and row.kind == "run" and self.app.room is not None:
            loss = last_challenger_warning(self.app.plan, self.app.room.state, [row.target])
            title = f"Stop {row.label}? It is the last challenger"
        if loss is None:
            self._ask_stop_reason(row)
            return
        self.app.push_screen(screens.ConfirmScreen(title, loss, yes="stop it anyway"),
                             lambda yes: yes and self._ask_stop_reason(row))

    def _ask_stop_reason(self, row) -> None:
        rid = row.run_id
        self.app.push_screen(screens.StopScreen(rid, self.app.plan.grace_seconds, row.label),
                             lambda reason: reason and self.act(
                                 "stop", lambda: self.session.stop(rid, reason)))

    def pause(self) -> None:
        paused = bool(self.app.room and self.app.room.state.paused)
        self.act("pause", lambda: self.session.pause(not paused))

    def wrapup(self) -> None:
        room = self.app.room
        if room is not None and room.wrapup.running:
            self.app.overlays.show_wrapup()
            return
        loss = wrapup_warning(self.app.plan, room.state) if room is not None else None
        self.app.push_screen(screens.ConfirmScreen(
            "Wrap up now? The verdict will be inconclusive" if loss else "Wrap up now?",
            "Running runs are checkpointed, then stopped; the bundle is "
            "built and verified. Queued runs will not start." + (f" {loss}" if loss else ""),
            yes="wrap up anyway" if loss else "wrap up"),
            lambda yes: yes and self.app.overlays.start_wrapup())

    def quit(self) -> None:
        """Close the room only: the engine process goes on driving the campaign (its
        rules, its next runs, its wrap-up); `itera-tui` reopens the room."""
        self.app.exit(0)

    def start_engine(self) -> None:
        """`r` while the engine is gone (stopped, or its supervisor gave up): start it."""
        start = getattr(self.session, "start_engine", None)
        if start is None:
            self.app.notify("this room drives its engine itself", severity="information")
            return
        self.act("engine", start)

    def open_run(self) -> None:
        row = self.app.selected_row()
        if row is None:
            self.app.notify("no run to open", severity="warning")
            return
        if row.run_id is None:
            self.app.notify(f"{row.label} has not started yet ({row.state})",
                            severity="information")
            return
        self.app.overlays.open_run(row.run_id)

    def decision(self) -> None:
        pending = self.app.room.state.decision_pending if self.app.room else None
        if pending is None:
            self.app.notify("no decision is pending", severity="information")
            return
        self.decision_shown_t = pending.t
        self.app.push_screen(screens.DecisionScreen(self.app.plan, pending, self.app.room),
                             self._decided)

    def _decided(self, choice: str | None) -> None:
        if choice == "continue":
            self.act("decision", lambda: self.session.decide(CONTINUE))
        elif choice == "drop":
            self.drop(at_decision=True)
        elif choice == "wrapup":
            self.app.push_screen(screens.ConfirmScreen(
                "Wrap up after the pilot?", "No full run will start; the bundle is built "
                "from what exists. A negative answer is a valid end.", yes="wrap up"),
                lambda yes: yes and self.act("decision", lambda: self.session.decide(WRAPUP),
                                             then=lambda: self.app.call_from_thread(
                                                 self.app.overlays.start_wrapup)))
