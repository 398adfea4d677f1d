"""The keys, all of them, with what each does (the footer only has room for some)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

LEGEND_LINE = ("timeline: ▒ planned  █ ran (its colour: the run's state)  ░ human time  "
               "┊ ▲ now  ┃ window end; lanes are lot:index")

EXPLAIN = {
    "checkpoint": "checkpoint the selected run now (acknowledged when the file is verified)",
    "drop": "drop optional variants (a picker: space marks, enter drops; mandatory refused)",
    "wrapup": "wrap up: stop runs (checkpoint first), build and verify the bundle",
    "stop": "stop the selected run (confirm, with a reason; a mandatory one says what is lost)",
    "pause": "pause / resume the queue (running runs go on)",
    "quit": "quit the control room; runs keep going in their own sessions",
    "help": "this help",
    "decision": "open the decision (after the pilot)",
    "open_run": "open the selected run: command, state, stop, checkpoints, stdout/stderr",
    "zoom": "zoom the focused panel to the whole screen, and back (tab moves the focus)",
    "ending": "the ending: verdict, budget, bundle, retrieval, the window left",
    "chart_all": "loss chart: selected run / all runs",
    "chart_metric": "chart: loss / quality metric",
    "select_next": "select the next run (tab moves the focus between panels, for z)",
    "select_prev": "select the previous run",
}


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help.close")]

    def __init__(self, bindings: list[Binding], lots: list[dict] | None = None):
        super().__init__(classes="modal")
        self.bindings_shown = bindings
        self.lots = lots or []

    def compose(self) -> ComposeResult:
        lines = []
        for b in self.bindings_shown:
            action = b.id or b.action.split("(")[0]  # ids name the action: `key('c...')`
            keys = b.key_display or ",".join(k.replace("question_mark", "?")
                                              for k in b.key.split(","))
            lines.append(f"  {keys:<10} {EXPLAIN.get(action, b.description)}")
        with Vertical(classes="dialog"):
            yield Static("Keys", classes="dialog-title")
            yield Static("\n".join(lines), classes="dialog-body", markup=False, id="help-keys")
            if self.lots:
                yield Static("\n".join(
                    f"  lot {lot['lot']}: {lot['gpu']} x{lot['gpus']}, "
                    f"{lot['price_usd']:.2f} USD, order {lot['order'] or '(none given)'}"
                    for lot in self.lots), classes="dialog-body", markup=False, id="help-lots")
            yield Static(LEGEND_LINE, classes="dialog-body", markup=False, id="help-legend")
            yield Static("esc close", classes="dialog-keys", markup=False)

    def action_close(self) -> None:
        self.dismiss(None)
