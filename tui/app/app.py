"""ControlRoom: the Textual app, built with its plan, engine, probes and clock.

Sources are injected so a test drives the real engine with a fake clock and a
fake NVML. The UI thread only draws: workers (see `workers.py`) tick the
engine and sample the probes and post frozen snapshots; one reactive holds the
latest room snapshot and one the latest probe reading, and their watchers hand
models to the panels, which redraw only what changed. Keys live in
`actions.py`; colours and layout in `control_room.tcss` / `screens.tcss`.
"""

from __future__ import annotations

import time
from typing import Callable

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.reactive import var
from textual.widgets import Footer

from ..campaign.calendar import build_calendar
from .actions import ActionsMixin
from .messages import (HistoryLoaded, LedgerEvent, Notice, ProbeUpdated, RoomUpdated,
                       StartWrapup, WrapupFinished, WrapupProgress)
from .room import RoomSnapshot, header_model
from .rows import run_rows
from .timeline_model import timeline_model
from .widgets import EventsLog, GpuPanel, LossChart, RoomHeader, RunsTable, Timeline
from .widgets.chart import ChartModel
from .widgets.gpu import gpu_model
from .workers import WorkersMixin

MAX_CHART_SERIES = 6
CHART_REFRESH_S = 5.0


class ControlRoom(WorkersMixin, ActionsMixin, App):
    CSS_PATH = ["control_room.tcss", "screens.tcss"]
    TITLE = "itera-tui"
    ENABLE_COMMAND_PALETTE = False
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = [
        Binding("c", "checkpoint", "Checkpoint", id="checkpoint"),
        Binding("d", "drop", "Drop", id="drop"),
        Binding("w", "wrapup", "Wrap up", id="wrapup"),
        Binding("s", "stop", "Stop", id="stop"),
        Binding("p", "pause", "Pause", id="pause"),
        Binding("x", "decision", "Decide", id="decision"),
        Binding("q", "quit_room", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", key_display="?", id="help"),
        Binding("down,j", "select_next", "Next run", show=False, id="select_next"),
        Binding("up,k", "select_prev", "Previous run", show=False, id="select_prev"),
        Binding("a", "chart_all", "All runs", show=False, id="chart_all"),
        Binding("m", "chart_metric", "Metric", show=False, id="chart_metric"),
    ]

    # one reactive per snapshot; `var` so a new snapshot repaints only the panels that
    # changed (a plain reactive on the App would repaint the whole screen every time)
    room: var[RoomSnapshot | None] = var(None, always_update=True, init=False)
    probe: var[ProbeUpdated | None] = var(None, always_update=True, init=False)

    def __init__(self, plan, engine, probes=None, clock: Callable[[], float] = time.time, *,
                 tick_interval: float = 0.5, sample_interval: float = 1.0,
                 refresh_interval: float = 1.0, auto_wrapup: bool = True):
        super().__init__()
        self.plan = plan
        self.engine = engine
        self.probes = probes
        self.clock = clock
        self.tick_interval = tick_interval
        self.sample_interval = sample_interval
        self.refresh_interval = refresh_interval
        self.auto_wrapup = auto_wrapup
        self.calendar = build_calendar(plan)
        self.rows: list = []
        self.selected: str | None = None
        self.user_selected = False  # until a person moves it, the selection follows the live run
        self.chart_all = False
        self.chart_metric = False
        self.wrapup_screen = None
        self.awaiting_checkpoint: set[str] = set()
        self.wrapup_thread = None
        self.wrapup_lines: list[str] = []
        self.wrapup_status = None
        self._wrapup_attempted = False
        self._decision_shown_t = None
        self._chart_drawn = float("-inf")
        self._init_workers()
        previous = engine.on_event
        engine.on_event = (self._relay_event if previous is None else
                           lambda ev: (previous(ev), self._relay_event(ev)))

    def compose(self) -> ComposeResult:
        # kept as attributes: App.query_one looks at the top screen, which may be a modal
        self.header_panel = RoomHeader(id="header")
        self.timeline_panel = Timeline(id="timeline")
        self.runs_panel = RunsTable(id="runs")
        self.gpu_panel = GpuPanel(id="gpus")
        self.chart_panel = LossChart(id="chart")
        self.events_panel = EventsLog(id="events")
        self.runs_panel.border_title = "runs"
        self.gpu_panel.border_title = "GPUs"
        self.chart_panel.border_title = "chart"
        self.events_panel.border_title = "events"
        yield self.header_panel
        yield self.timeline_panel
        with Grid(id="body"):
            yield self.runs_panel
            yield self.gpu_panel
            yield self.chart_panel
            yield self.events_panel
        yield Footer()

    def on_mount(self) -> None:
        self.header_panel.show(header_model(self.plan, None))
        self._schedule_tick()
        self._schedule_probe()
        self.set_interval(self.tick_interval, self._schedule_tick)
        if self.probes is not None:
            self.set_interval(self.sample_interval, self._schedule_probe)

    def on_unmount(self) -> None:
        self.detach()

    def check_action(self, action: str, parameters) -> bool | None:
        if action in {b.action for b in self.BINDINGS} and self.modal_open():
            return False
        if action == "decision":
            return bool(self.room and self.room.state.decision_pending is not None)
        return True

    # -- snapshots in, models out ---------------------------------------------
    def on_room_updated(self, message: RoomUpdated) -> None:
        self.room = message.room

    def watch_room(self, old: RoomSnapshot | None, room: RoomSnapshot | None) -> None:
        if room is None:
            return
        self.header_panel.show(header_model(self.plan, room))
        self.timeline_panel.show(timeline_model(self.calendar, room.state, room.now,
                                                room.projection.projected_end_t))
        self.rows = run_rows(self.plan, self.calendar, room.engine, room.now)
        before = self.selected
        keys = [r.key for r in self.rows]
        alive = [r.key for r in self.rows if r.alive]
        if self.selected not in keys or (not self.user_selected and alive
                                         and self.selected not in alive):
            self.selected = alive[0] if alive else (keys[0] if keys else None)
        self._render_selection(force_chart=self.selected != before)
        pending_before = old is not None and old.state.decision_pending is not None
        pending = room.state.decision_pending
        if pending_before != (pending is not None):
            self.refresh_bindings()
        if pending is not None and pending.get("t") != self._decision_shown_t \
                and not self.modal_open():
            self.action_decision()
        if (self.auto_wrapup and room.engine.finished and room.state.wrapup is None
                and not self._wrapup_attempted and not self._wrapup_running):
            self.start_wrapup()

    def _render_selection(self, force_chart: bool = False) -> None:
        self.runs_panel.show((tuple(self.rows), self.selected))
        self._render_chart(force=force_chart)

    def _render_chart(self, force: bool = False) -> None:
        """The chart shows trends: redrawn every CHART_REFRESH_S, at once on a key."""
        room = self.room
        now = time.monotonic()
        if room is None or (not force and now - self._chart_drawn < CHART_REFRESH_S):
            return
        self._chart_drawn = now
        self.chart_panel.show(self.chart_model(room))

    def chart_model(self, room: RoomSnapshot) -> ChartModel:
        metric = self.plan.campaign.metric if self.chart_metric else "loss"
        live = room.engine.live
        if self.chart_all:
            runs = [r for r in room.state.runs if r.id in live][-MAX_CHART_SERIES:]
            title = f"{metric} · all runs"
        else:
            row = self.selected_row()
            runs = [r for r in room.state.runs
                    if row is not None and r.id == row.run_id and r.id in live]
            title = f"{metric} · {row.label if row else 'no run'}"
            if row is not None and row.run_id is None:
                title += " · not started"
        series = []
        for r in runs:
            view = live[r.id]
            points = view.metric_history if self.chart_metric else view.loss_history
            series.append((r.target if r.kind != "pilot" else f"p:{r.target}", tuple(points)))
        return ChartModel(title, tuple(series), self.thresholds(metric, [r.target for r in runs]))

    def thresholds(self, metric: str, targets: list[str]) -> tuple:
        out = []
        for rule in self.plan.stops:
            if rule.rule != "threshold" or rule.metric != metric:
                continue
            if targets and not any(rule.applies_to(t) for t in targets):
                continue
            bound = rule.below if rule.below is not None else rule.above
            label = f"stop {'<' if rule.below is not None else '>'}"
            if bound is not None and (bound, label) not in out:
                out.append((bound, label))
        c = self.plan.campaign
        if metric == c.metric and c.threshold is not None:
            out.append((c.threshold, "threshold"))
        return tuple(out)

    def on_probe_updated(self, message: ProbeUpdated) -> None:
        self.probe = message

    def watch_probe(self, message: ProbeUpdated | None) -> None:
        if message is None:
            return
        self.gpu_panel.show(gpu_model(message.sample, message.holders))
        # its warnings come back as ledger events: logged and notified once, there

    # -- events ------------------------------------------------------------------
    def on_history_loaded(self, message: HistoryLoaded) -> None:
        log = self.events_panel
        for ev in message.events:
            log.add_event(ev)

    def on_ledger_event(self, message: LedgerEvent) -> None:
        ev = message.event
        if not self.events_panel.add_event(ev):
            return
        kind = ev.get("event")
        if kind == "stop_rule_fired":
            value = ev.get("value")
            self.notify(f"{ev.get('run')}: {ev.get('rule')} = {value} — {ev.get('reason')}",
                        title="stop rule fired", severity="error", timeout=20)  # the row keeps it
            self.bell()  # tmux marks the window
        elif kind == "checkpoint_verified" and (
                not ev.get("ok") or ev.get("run") in self.awaiting_checkpoint):
            # scheduled checkpoints stay in the log; a toast for `c` and for failures only
            self.awaiting_checkpoint.discard(ev.get("run"))
            ok = ev.get("ok")
            self.notify(f"checkpoint of {ev.get('run')} "
                        + ("verified" if ok else f"FAILED verification: {ev.get('problem')}"),
                        severity="information" if ok else "error", timeout=15)
        elif kind == "warning":
            self.notify(str(ev.get("message")), title="warning", severity="warning",
                        timeout=20)

    def on_notice(self, message: Notice) -> None:
        self.notify(message.text, title=message.title, severity=message.severity,
                    timeout=15 if message.severity == "error" else 6)
        if message.log:
            self.events_panel.add_line(message.t or self.clock(), message.text,
                                       "decision" if message.severity == "information"
                                       else "warning")

    # -- wrap-up -------------------------------------------------------------------
    def on_start_wrapup(self, message: StartWrapup) -> None:
        self.start_wrapup()

    def on_wrapup_progress(self, message: WrapupProgress) -> None:
        self.wrapup_lines.append(message.text)
        if self.wrapup_screen is not None and self.wrapup_screen in self.screen_stack:
            self.wrapup_screen.add(message.text)

    def on_wrapup_finished(self, message: WrapupFinished) -> None:
        self.wrapup_status = (message.ok, message.text)
        if self.wrapup_screen is not None and self.wrapup_screen in self.screen_stack:
            self.wrapup_screen.finish(message.ok, message.text)
        if not message.in_ledger:
            self.events_panel.add_line(self.clock(), message.text,
                                       "decision" if message.ok else "warning")
        self.notify(message.text, title="wrap-up", severity="information" if message.ok
                    else "error", timeout=30)
