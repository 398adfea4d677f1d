"""One run on the whole screen: what ran, its state, why it stopped, its checkpoints,
and the last lines of its stdout and stderr, live while the screen is open.

The facts come from the snapshots the app already receives (`run_detail`);
the tails are read from the end of the run's files by a worker thread once a
second (`tails.read_tail`, bounded), never on the UI thread.
"""

from __future__ import annotations

from pathlib import Path

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ...campaign.text import for_terminal
from ..run_detail import RunDetail, run_detail
from ..tails import Tail, read_tail
from ..widgets.base import ModelPanel
from .facts import facts_grid

TAIL_REFRESH_S = 1.0


class TailView(ModelPanel):
    """The newest lines of a tail that fit, cropped at the right edge."""

    def render(self) -> Text:
        tail: Tail | None = self.model
        if tail is None:
            return Text("reading…", style="dim")
        if not tail.lines:
            return Text(tail.note or "(empty)", style="dim")
        shown = tail.lines[-max(1, self.size.height):]
        return Text("\n".join(shown), no_wrap=True, overflow="ellipsis")


def facts_table(detail: RunDetail) -> Table:
    return facts_grid(detail.facts)


def _from_campaign_folder(plan, run_dir: Path) -> str:
    """The run's folder as a person in the campaign folder types it (`.itera/runs/ID`):
    the path the run screen names must open from where `itera-tui` was started."""
    try:
        return run_dir.relative_to(plan.root).as_posix()
    except ValueError:  # a state folder outside the campaign folder: said whole
        return str(run_dir)


class RunScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,enter", "close", "Close", id="run.close")]

    def __init__(self, plan, room, run_id: str):
        super().__init__(classes="modal run-screen")
        self.plan = plan
        self.run_id = run_id
        self.run_dir = Path(plan.state_dir) / "runs" / run_id
        self.shown_dir = _from_campaign_folder(plan, self.run_dir)
        self.room = room
        self.detail = run_detail(plan, room, run_id)

    def compose(self) -> ComposeResult:
        with Vertical(id="run-dialog"):
            yield Static(for_terminal(self.detail.title if self.detail else self.run_id),
                         id="run-title", markup=False)
            with VerticalScroll(id="run-facts-scroll"):  # a long stop reason: ↑/↓
                yield Static(facts_table(self.detail) if self.detail else "", id="run-facts")
            yield Static("stdout", id="stdout-title", classes="tail-title", markup=False)
            yield TailView(id="stdout-tail", classes="tail")
            yield Static("stderr", id="stderr-title", classes="tail-title", markup=False)
            yield TailView(id="stderr-tail", classes="tail")
            yield Static("esc close · ↑/↓ scroll the facts · the tails follow the files live",
                         classes="dialog-keys",
                         markup=False)

    def on_mount(self) -> None:
        self.query_one("#run-facts-scroll").focus()
        self.refresh_tails()
        self.set_interval(TAIL_REFRESH_S, self.refresh_tails)

    def show_room(self, room) -> None:
        """A new snapshot: the facts follow it (state, step, checkpoints, stop)."""
        detail = run_detail(self.plan, room, self.run_id)
        if detail is not None and detail != self.detail and self.is_mounted:
            self.detail = detail
            self.query_one("#run-facts", Static).update(facts_table(detail))

    def refresh_tails(self) -> None:
        self.run_worker(self._read_tails, thread=True, exclusive=True, group="tails",
                        exit_on_error=False)

    def _read_tails(self) -> None:  # a worker thread
        out = read_tail(self.run_dir / "stdout.log")
        err = read_tail(self.run_dir / "stderr.log")
        try:
            self.app.call_from_thread(self._show_tails, out, err)
        except RuntimeError:  # the app is closing
            pass

    def _show_tails(self, out: Tail, err: Tail) -> None:
        if not self.is_mounted:
            return
        for name, tail in (("stdout", out), ("stderr", err)):
            self.query_one(f"#{name}-tail", TailView).show(tail)
            size = f" · {tail.size:,} bytes" if tail.size else ""
            self.query_one(f"#{name}-title", Static).update(
                f"{name} (last lines{size}) · {self.shown_dir}/{name}.log")

    def tail_text(self, name: str) -> str:
        """What the tail shows now (tests)."""
        return self.query_one(f"#{name}-tail", TailView).plain()

    def action_close(self) -> None:
        self.dismiss(None)
