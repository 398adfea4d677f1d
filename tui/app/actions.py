"""What each key does: checkpoint, drop, wrap up, stop, pause, quit, decide.

Destructive keys (drop, wrap up, stop) go through a confirm modal first; the
engine call itself runs in a worker (it writes fsync'ed ledger lines). The
engine stays the judge: a mandatory variant is refused by the engine, with
its own words, not hidden by the UI.
"""

from __future__ import annotations

import threading

from textual.screen import ModalScreen

from .messages import StartWrapup
from .screens import (ConfirmScreen, DecisionScreen, DropScreen, HelpScreen, StopScreen,
                      WrapupScreen)


class ActionsMixin:
    # -- selection -----------------------------------------------------------
    def selected_row(self):
        return next((r for r in self.rows if r.key == self.selected), None)

    def _selected_alive(self, verb: str):
        row = self.selected_row()
        if row is None or not row.alive or row.run_id is None:
            self.notify(f"select a running run to {verb} (↑/↓)", severity="warning")
            return None
        return row

    def action_select_next(self) -> None:
        self._move_selection(1)

    def action_select_prev(self) -> None:
        self._move_selection(-1)

    def _move_selection(self, delta: int) -> None:
        if not self.rows:
            return
        keys = [r.key for r in self.rows]
        i = keys.index(self.selected) if self.selected in keys else 0
        self.selected = keys[max(0, min(len(keys) - 1, i + delta))]
        self.user_selected = True
        self._render_selection(force_chart=True)

    # -- keys ------------------------------------------------------------------
    def action_checkpoint(self) -> None:
        row = self._selected_alive("checkpoint")
        if row is None:
            return
        rid = row.run_id
        self.awaiting_checkpoint.add(rid)  # its verification is worth a toast
        self._engine_action("checkpoint", lambda: self.engine.request_checkpoint(rid),
                            f"checkpoint requested for {rid}; acknowledged when the file "
                            "is verified")

    def action_drop(self) -> None:
        state = self.room.state if self.room else None
        dropped = state.dropped if state else frozenset()
        variants = [(v.id, v.category) for v in self.plan.variants if v.id not in dropped]
        if not variants:
            self.notify("no variant left to drop", severity="warning")
            return
        self.push_screen(DropScreen(variants), self._dropped_picked)

    def _dropped_picked(self, vid: str | None, decision: bool = False) -> None:
        if vid is None:
            return
        verb = (lambda: self.engine.decide(f"drop:{vid}")) if decision \
            else (lambda: self.engine.drop_variant(vid))
        if not self.plan.variant(vid).optional:  # the engine refuses, in its own words
            self._engine_action("drop", verb)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self._engine_action("drop", verb, f"variant {vid} dropped")

        self.push_screen(ConfirmScreen(
            f"Drop variant {vid}?",
            f"{vid} will not run (a run of it now is stopped). The decision is recorded "
            "in the ledger; the initial plan is kept as planned.", yes="drop"), confirmed)

    def action_stop(self) -> None:
        row = self._selected_alive("stop")
        if row is None:
            return
        rid = row.run_id

        def reason_given(reason: str | None) -> None:
            if reason:
                self._engine_action("stop", lambda: self.engine.stop_run(rid, reason),
                                    f"stop requested for {rid}")

        self.push_screen(StopScreen(rid, self.plan.grace_seconds), reason_given)

    def action_pause(self) -> None:
        paused = bool(self.room and self.room.state.paused)
        self._engine_action("pause", lambda: self.engine.set_paused(not paused),
                            "queue resumed" if paused else
                            "queue paused: nothing new starts; running runs go on")

    def action_wrapup(self) -> None:
        if self._wrapup_running:
            self._show_wrapup()
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.start_wrapup()

        self.push_screen(ConfirmScreen(
            "Wrap up now?", "Running runs are checkpointed, then stopped; the bundle is "
            "built and verified. Queued runs will not start.", yes="wrap up"), confirmed)

    def action_quit_room(self) -> None:
        if not self._wrapup_running:
            self.exit(0)
            return

        def confirmed(yes: bool | None) -> None:
            if yes:
                self.exit(0)

        self.push_screen(ConfirmScreen(
            "Quit while the wrap-up runs?", "The screen closes and this terminal waits for "
            "the bundle to be written and verified (Ctrl+C leaves it unfinished; "
            "`itera-tui wrapup` redoes it). Runs are not touched.", yes="quit"), confirmed)

    def action_help(self) -> None:
        self.push_screen(HelpScreen([b for b in self.BINDINGS]))

    def action_decision(self) -> None:
        pending = self.room.state.decision_pending if self.room else None
        if pending is None:
            self.notify("no decision is pending", severity="information")
            return
        self._decision_shown_t = pending.get("t")
        self.push_screen(DecisionScreen(self.plan, pending), self._decided)

    def _decided(self, choice: str | None) -> None:
        if choice == "continue":
            self._engine_action("decision", lambda: self.engine.decide("continue"),
                                "decision recorded: continue")
        elif choice == "drop":
            dropped = self.room.state.dropped if self.room else frozenset()
            variants = [(v.id, v.category) for v in self.plan.variants if v.id not in dropped]
            self.push_screen(DropScreen(variants, "Decision: drop which variant?"),
                             lambda vid: self._dropped_picked(vid, decision=True))
        elif choice == "wrapup":
            def confirmed(yes: bool | None) -> None:
                if yes:
                    self._engine_action("decision", lambda: self.engine.decide("wrapup"),
                                        "decision recorded: wrap up", then=StartWrapup())

            self.push_screen(ConfirmScreen(
                "Wrap up after the pilot?", "No full run will start; the bundle is built "
                "from what exists. A negative answer is a valid end.", yes="wrap up"),
                confirmed)

    def action_chart_all(self) -> None:
        self.chart_all = not self.chart_all
        self._render_chart(force=True)

    def action_chart_metric(self) -> None:
        self.chart_metric = not self.chart_metric
        self._render_chart(force=True)

    # -- wrap-up ---------------------------------------------------------------
    def start_wrapup(self) -> None:
        if self._wrapup_running:
            return
        self._wrapup_running = True
        self._wrapup_attempted = True
        self.wrapup_lines = []
        self.wrapup_status = None
        self._show_wrapup()
        # a plain daemon thread, not a Textual worker: quitting must not hang the
        # terminal until the bundle is built (run_app says it waits, and Ctrl+C works)
        self.wrapup_thread = threading.Thread(target=self._wrapup_work, name="itera-wrapup",
                                              daemon=True)
        self.wrapup_thread.start()

    def _show_wrapup(self) -> None:
        if self.wrapup_screen is not None and self.wrapup_screen in self.screen_stack:
            return
        self.wrapup_screen = WrapupScreen(self.wrapup_lines, self.wrapup_status)
        self.push_screen(self.wrapup_screen)

    def modal_open(self) -> bool:
        return isinstance(self.screen, ModalScreen)
