"""ControlRoom: the Textual app, built with its plan and a session.

The session (`tui.session.SessionSource`) is injected, so a test drives a
real campaign with a fake clock and a fake NVML, or a replayed one for
snapshots. The UI thread only draws: the `SessionPump` thread steps the
session and posts frozen snapshots; one reactive holds the latest, and its
watcher hands models to the panels, which redraw only what changed. Keys
live in `keys.py`, the screens that follow the campaign in `overlays.py`;
colours and layout in `control_room.tcss` / `screens.tcss`.

Made for an 80x24 tmux pane: notices are marked lines of the events log (`toasts.py`),
`z` zooms the focused panel, `enter` opens the selected run, and once the bundle is
verified the ending is shown and the keys that no longer apply leave the footer. Until a
key, the selection follows the first live training run (never an empty chart in the
pilots); after one it moves only on a key.
"""

from __future__ import annotations

import time
from typing import Callable

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.reactive import var
from textual.screen import ModalScreen
from textual.widgets import Footer

from ..campaign.calendar import build_calendar
from ..session import SessionSnapshot
from .chart_series import chart_model
from .hangup import quit_on_hangup
from .keys import RoomKeys, key_applies, keys_changed
from .messages import HistoryLoaded, LedgerEvent, Notice, RoomUpdated, WrapupProgress
from .overlays import Overlays
from .pump import CLOCK_REFRESH_S, SessionPump, fatal_exit
from .room import conclusion_line, header_model, link_text
from .rows import kept_selection, labels_of, run_rows
from . import screens
from .timeline_model import timeline_model
from .toasts import ToastGate
from .widgets import EventsLog, GpuPanel, LossChart, RoomHeader, RunsTable, Timeline
from .widgets.gpu import gpu_model
from .zoom import Zoom

HISTORY_EVENTS = 300
CHART_REFRESH_S = 5.0
# the keys that act on the selected run: after one, the selection stays where it is
ROW_KEYS = frozenset({"checkpoint", "stop", "open_run"})


class ControlRoom(App):
    CSS_PATH = ["control_room.tcss", "screens.tcss"]
    TITLE = "itera-tui"
    ENABLE_COMMAND_PALETTE = False
    HORIZONTAL_BREAKPOINTS = [(120, "-wide")]  # 80x24 is the unclassed default
    VERTICAL_BREAKPOINTS = [(36, "-tall")]
    BINDINGS = [
        Binding("c", "key('checkpoint')", "Ckpt", id="checkpoint"),
        Binding("d", "key('drop')", "Drop", id="drop"),
        Binding("w", "key('wrapup')", "Wrap up", id="wrapup"),
        Binding("s", "key('stop')", "Stop", id="stop"),
        Binding("p", "key('pause')", "Pause", id="pause"),
        Binding("x", "key('decision')", "Decide", id="decision"),
        Binding("e", "ending", "Ending", id="ending"),
        Binding("enter", "key('open_run')", "Run", key_display="⏎", id="open_run"),
        Binding("z", "zoom", "Zoom", id="zoom"),
        Binding("r", "key('start_engine')", "Start engine", id="start_engine"),
        Binding("q", "key('quit')", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", key_display="?", id="help"),
        Binding("down,j", "select(1)", "Next run", show=False, id="select_next"),
        Binding("up,k", "select(-1)", "Previous run", show=False, id="select_prev"),
        Binding("a", "chart('all')", "All runs", show=False, id="chart_all"),
        Binding("m", "chart('metric')", "Metric", show=False, id="chart_metric"),
    ]

    # one reactive per snapshot; `var` so a new snapshot repaints only the panels that
    # changed (a plain reactive on the App would repaint the whole screen every time)
    room: var[SessionSnapshot | None] = var(None, always_update=True, init=False)

    def __init__(self, plan, session, clock: Callable[[], float] = time.time, *,
                 tick_interval: float = 0.5, refresh_interval: float = 1.0,
                 idle_interval: float = 15.0, auto_wrapup: bool = True,
                 on_first_paint: Callable[[], None] | None = None):
        super().__init__()
        self.on_first_paint = on_first_paint
        self.plan = plan
        self.session = session
        self.clock = clock
        self.tick_interval = tick_interval
        self.idle_interval = idle_interval
        self.auto_wrapup = auto_wrapup
        self.calendar = build_calendar(plan)
        self.rows: list = []
        self.selected: str | None = None
        self.selection_by_key = False  # until a key, it follows the live training runs
        self.chart_all = False
        self.chart_metric = False
        self.keys = RoomKeys(self, session)
        self.overlays = Overlays(self, session)
        self.toasts = ToastGate(self)
        self.zoom: Zoom | None = None
        self.pump = SessionPump(session, lambda snap: self.post_message(RoomUpdated(snap)),
                                lambda text: self.post_message(Notice(
                                    text, "error", "engine", log=True, t=self.clock())),
                                refresh_interval=refresh_interval, idle_interval=idle_interval,
                                on_fatal=lambda text: self.call_from_thread(fatal_exit, self, text))
        self._chart_drawn = float("-inf")
        self._probe_shown = None
        self._conclusion_logged: str | None = None

    def compose(self) -> ComposeResult:
        # kept as attributes: App.query_one looks at the top screen, which may be a modal
        # `classes=` at construction: an add_class() here restyles, five times over
        self.header_panel = RoomHeader(id="header")
        self.timeline_panel = Timeline(id="timeline", classes="panel")
        self.runs_panel = RunsTable(id="runs", classes="panel",
                                    metric=self.plan.campaign.metric)
        self.gpu_panel = GpuPanel(id="gpus", classes="panel")
        self.chart_panel = LossChart(id="chart", classes="panel")
        self.events_panel = EventsLog(id="events", classes="panel")
        for panel, title in ((self.timeline_panel, "timeline"), (self.runs_panel, "runs"),
                             (self.gpu_panel, "GPUs"), (self.chart_panel, "chart"),
                             (self.events_panel, "events")):
            panel.border_title = title
        yield self.header_panel
        yield self.timeline_panel
        with Grid(id="body"):
            yield self.runs_panel
            yield self.gpu_panel
            yield self.chart_panel
            yield self.events_panel
        yield Footer(compact=True)

    def on_mount(self) -> None:
        quit_on_hangup(self.exit)
        self.zoom = Zoom(self.screen, (self.timeline_panel, self.runs_panel, self.gpu_panel,
                                       self.chart_panel, self.events_panel), self.runs_panel)
        self.runs_panel.focus()
        self.session.subscribe(self._relay_event)  # first: no event falls between the two
        self.post_message(HistoryLoaded(self.session.history(HISTORY_EVENTS)))
        ledger = self.plan.state_dir / "ledger.jsonl"
        if self.plan.root.is_dir():  # this box's campaign: older events page in from its ledger
            from ..engine.ledger.pages import events_before

            self.events_panel.older = lambda before, n: events_before(ledger, before, n)
        # the first frame already holds the runs, from the replayed ledger in memory; the
        # pump's first step (which reads the runs' files) follows off this thread, and
        # starts once that frame is drawn (it would take the interpreter from the paint)
        try:
            self.room = self.session.replayed()
        except Exception as exc:  # the pump's first step brings the room instead
            self.header_panel.show(header_model(self.plan, None))
            self.toasts.say(f"replaying the ledger failed: {type(exc).__name__}: {exc}",
                            "room", "error")
        self.call_after_refresh(self._first_frame_drawn)

    def _first_frame_drawn(self) -> None:
        if self.on_first_paint is not None:
            self.on_first_paint()
        if self.pump.stopped:  # the room closed before its first frame
            return
        self.pump.follow_pushes()
        self.pump.start()
        self.pump.request(urgent=True)
        self._schedule_step()

    def _schedule_step(self) -> None:
        """Ask the pump for a step, then again in `tick_interval`, or only every
        `idle_interval` while nothing can change (a key or an event wakes it sooner).
        A source that pushes its snapshots is stepped on each push: the timer then only
        moves the clocks (countdown, ages), every CLOCK_REFRESH_S."""
        self.pump.request()
        if self.pump.idle:
            wait = self.idle_interval
        else:
            wait = CLOCK_REFRESH_S if self.pump.pushed else self.tick_interval
        self.set_timer(wait, self._schedule_step)

    def on_unmount(self) -> None:
        self.pump.stop()

    def _relay_event(self, ev: dict) -> None:  # from the thread that recorded it
        self.post_message(LedgerEvent(ev))
        self.pump.request(urgent=True)

    def modal_open(self) -> bool:
        return isinstance(self.screen, ModalScreen)

    def check_action(self, action: str, parameters) -> bool | None:
        """False hides a key from the footer: under a modal, and once it no longer applies."""
        if self.modal_open() and action in {b.action.split("(")[0] for b in self.BINDINGS}:
            return False
        return key_applies(parameters[0] if action == "key" and parameters else action,
                           self.room)

    def notify(self, message, *, title: str = "", severity: str = "information",
               timeout: float | None = None, markup: bool = False,
               log: bool | None = None) -> None:
        """A notice: a marked line of the events log (`toasts.py`), never a toast."""
        self.toasts.say(str(message), title, severity, timeout, markup, log)


    # -- snapshots in, models out ---------------------------------------------
    def on_room_updated(self, message: RoomUpdated) -> None:
        self.room = message.room

    def watch_room(self, old: SessionSnapshot | None, room: SessionSnapshot | None) -> None:
        if room is None:
            return
        try:
            self._show_room(old, room)
        except Exception as exc:  # a bad model must not take the room (and its keys) down
            self.toasts.say(f"room update failed: {type(exc).__name__}: {exc}", "room",
                            "error")

    def _show_room(self, old: SessionSnapshot | None, room: SessionSnapshot) -> None:
        self.header_panel.show(header_model(self.plan, room))
        self.timeline_panel.show(timeline_model(self.calendar, room.state, room.now,
                                                room.projection.projected_end_t))
        old_rows, self.rows = self.rows, run_rows(self.plan, self.calendar, room.engine,
                                                   room.now)
        before = self.selected
        self.selected = kept_selection(old_rows, self.rows, self.selected,
                                       follow=not self.selection_by_key)
        self._render_selection(force_chart=self.selected != before)
        labels = labels_of(room.state)
        self.events_panel.set_labels(labels)
        if room.probe is not None and room.probe is not self._probe_shown:
            self._probe_shown = room.probe
            self.gpu_panel.show(gpu_model(room.probe, {
                dev: tuple(labels.get(rid, rid) for rid in rids) for dev, rids in room.holders}))
        self._log_conclusion(room)
        self._log_link(old, room)
        pending = room.state.decision_pending
        if keys_changed(old, room):
            self.refresh_bindings()
        if pending is not None and pending.t != self.keys.decision_shown_t \
                and not self.modal_open():
            self.keys.decision()
        self.overlays.follow(old, room)

    def _log_conclusion(self, room: SessionSnapshot) -> None:
        """The verdict (or, before it, the conclusion) once, in the events log."""
        text = conclusion_line(room)
        if text is not None and text != self._conclusion_logged:
            self._conclusion_logged = text
            self.events_panel.add_line(room.now, text, "decision")

    def _log_link(self, old: SessionSnapshot | None, room: SessionSnapshot) -> None:
        """A lost link and its return, once each, in the events log (and a toast)."""
        was = old is not None and old.link is not None and old.link.lost
        now_lost = room.link is not None and room.link.lost
        if now_lost and not was:
            self.toasts.say(link_text(room.link), "engine link", "warning")
        elif was and not now_lost:
            self.events_panel.add_line(room.now, "link to the engine back: caught up from "
                                       "the last event seen", "decision")

    def selected_row(self):
        return next((r for r in self.rows if r.key == self.selected), None)

    def _render_selection(self, force_chart: bool = False) -> None:
        self.runs_panel.show((tuple(self.rows), self.selected))
        room = self.room
        now = time.monotonic()
        if room is None or (not force_chart and now - self._chart_drawn < CHART_REFRESH_S):
            return
        self._chart_drawn = now
        self.chart_panel.show(chart_model(self.plan, room, self.selected_row(),
                                          self.chart_all, self.chart_metric))

    def action_select(self, delta: int) -> None:
        """down / up (j / k): move the selection, never past the ends."""
        if not self.rows:
            return
        keys = [r.key for r in self.rows]
        i = keys.index(self.selected) if self.selected in keys else 0
        self.selection_by_key = True
        self.selected = keys[max(0, min(len(keys) - 1, i + delta))]
        self._render_selection(force_chart=True)

    # -- events ------------------------------------------------------------------
    def on_history_loaded(self, message: HistoryLoaded) -> None:
        for ev in message.events:
            self.events_panel.add_event(ev)

    def on_ledger_event(self, message: LedgerEvent) -> None:
        if self.events_panel.add_event(message.event):
            self.toasts.ledger_event(message.event, self.keys.awaiting_checkpoint)

    def on_notice(self, message: Notice) -> None:
        self.toasts.notice(message)

    # -- the wrap-up and the screens that follow the campaign ---------------------------
    def on_wrapup_progress(self, message: WrapupProgress) -> None:
        self.overlays.wrapup_line(message.text)

    # -- keys: the behaviour lives in RoomKeys ------------------------------------------
    def action_key(self, name: str) -> None:
        """c d w s p x, enter and q: `RoomKeys.<name>()`. After a key that acts on the
        selected run (c, s, enter) the selection stays put; the others (the decision,
        a drop, pause, wrap-up) concern no row, so the selection goes on following the
        live training: `x` then `c` at the decision point moves it to the full runs, not
        leaves it on the pilot a rule stopped."""
        if name in ROW_KEYS:
            self.selection_by_key = True
        getattr(self.keys, name)()

    def action_ending(self) -> None:
        self.overlays.show_ending()

    def action_zoom(self) -> None:
        self.zoom.toggle(self.focused)
        if self.zoom.covers(self.runs_panel):
            self.clear_notifications()
        self._render_selection(force_chart=True)

    def action_help(self) -> None:
        from .keys import campaign_over, key_applies

        shown = [b for b in self.BINDINGS  # `r` only while the engine's link is down
                 if b.id != "start_engine" or key_applies("start_engine", self.room)]
        self.push_screen(screens.HelpScreen(shown, self.plan.order_references(),
                                            self.plan.campaign.question,
                                            over=campaign_over(self.room)))

    def action_chart(self, what: str) -> None:
        """`a`: the selected run / all runs; `m`: the loss / the quality metric."""
        if what == "all":
            self.chart_all = not self.chart_all
        else:
            self.chart_metric = not self.chart_metric
        self._render_selection(force_chart=True)
