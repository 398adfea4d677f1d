"""The keys, all of them, with what each does (the footer only has room for some), and
every symbol the room draws, explained.

At 80x24 the help is longer than the pane: it scrolls (↑/↓, page keys, home
/ end), and the line under it says so, so the last lines (the lots, the
timeline marks, `esc close`) are never out of reach.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ...campaign.text import for_terminal
from ..timeline_model import ACTUAL_ROW

LEGEND_LINE = ("timeline: ▒ planned  █ ran (its colour: the run's state)  ░ human time  "
               "┊ ▲ now  ┃ window end; lanes are lot:index")

SYMBOLS = (
    ("timeline", "two rows per GPU lane: the one named `lot:index` (lot1:0: the first "
                 f"GPU of lot 1) is what the calendar planned, `{ACTUAL_ROW}` under it what "
                 "ran"),
    ("off", "the timeline's row for time that uses no GPU: ░ human preparation and "
            "decisions, ▒ host work such as the wrap-up"),
    ("▒ █ ░", "planned machine time · what ran (green running or done, red stopped or "
              "failed) · human time"),
    ("┊ ▲", "now: ┊ down the rows, ▲ on the axis"),
    ("┃", "the end of the rental window"),
    ("ckpt", "age of the run's last checkpoint: ✓ verified, ? written and being "
             "verified, ✗ failed verification, ↻ rotated away by the trainer before it "
             "could be read (not a failure), — none yet"),
    ("ckpt every", "the header: how often the engine asks for a checkpoint; (auto): "
                   "Young's interval from the measured write time"),
    ("✓ ✕", "runs table: done · stopped (the rule and its reason follow; enter shows it "
            "whole)"),
    ("·pilot ·run", "a variant's pilot and its full run; #2 a second attempt"),
    ("↳", "GPU panel: the runs on that GPU (+N: more than fit)"),
    ("chart ▲", "a diverged run: clipped at the top edge, marked with its value; it "
                "never sets the scale"),
    ("chart ┄", "a dashed row: a bound on the charted value, named with its value in the "
                "chart's title when it fits (`┄ stop < 0.4`: a stop rule stops a run whose "
                "curve crosses it; `┄ threshold`: the campaign's threshold on its metric)"),
    ("◆", "events log: a notice, marked for a few seconds (z on the log: every line "
          "whole; ↑ ↓ pgup pgdn home end scroll its whole history, from the ledger)"),
    ("…", "a line cut at the edge: the run screen (enter), the ending (e) or the "
          "zoomed panel (z) has it whole; the header's question is whole at the top of "
          "this help, its verdict in the ending (e)"),
)

EXPLAIN = {
    "checkpoint": "checkpoint the selected run now (acknowledged when the file is verified)",
    "drop": "drop optional variants (a picker: space marks, enter drops; mandatory refused)",
    "wrapup": "wrap up: stop runs (checkpoint first), build and verify the bundle",
    "stop": "stop the selected run (confirm, with a reason; a mandatory one says what is lost)",
    "pause": "pause / resume the queue (running runs go on)",
    "quit": "quit the room: it closes, the campaign goes on (its engine drives it); `itera-tui` reopens it",
    "help": "this help",
    "decision": "open the decision (after the pilot)",
    "open_run": "open the selected run: command, state, stop, checkpoints, stdout/stderr",
    "zoom": "zoom the focused panel to the whole screen, and back (tab moves the focus)",
    "ending": "the ending: verdict, budget, bundle, figures, the fetch command (y copies)",
    "chart_all": "loss chart: selected run / all runs",
    "chart_metric": "chart: loss / quality metric",
    "select_next": "select the next run (tab moves the focus between panels, for z)",
    "select_prev": "select the previous run",
}


def over_explain() -> dict[str, str]:
    """The lines that change once the campaign is finished and wrapped up: its engine
    drives nothing any more (the words `q` then leaves on the terminal)."""
    from ...service.lifetime import IDLE_EXIT_S

    return {"quit": "quit the room: it closes; the campaign is finished, its engine only "
                    f"answers and goes by itself {IDLE_EXIT_S / 60:g} min after the last "
                    "room closes; `itera-tui` reopens it"}


def key_rows(bindings: list[Binding], over: bool = False) -> list[tuple[str, str]]:
    """Every key with what it does; `over` (the campaign finished and wrapped up): the
    keys that no longer apply (the footer has dropped them) say so, and `q` says the
    engine no longer drives anything."""
    from ..keys import OVER_ACTIONS

    explain = {**EXPLAIN, **over_explain()} if over else EXPLAIN
    rows = []
    for b in bindings:
        action = b.id or b.action.split("(")[0]  # ids name the action: `key('c...')`
        keys = b.key_display or ",".join(k.replace("question_mark", "?")
                                          for k in b.key.split(","))
        said = explain.get(action, b.description)
        if over and action in OVER_ACTIONS:
            said += " (no longer: the campaign is over)"
        rows.append((keys, said))
    return rows


def two_columns(rows, width: int) -> Table:
    """Marks on the left, their meaning wrapped beside them (a hanging indent)."""
    table = Table.grid(padding=(0, 1))
    table.add_column(no_wrap=True, width=width)
    table.add_column(overflow="fold")
    for left, right in rows:
        table.add_row(Text(left), Text(right))
    return table


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q", "close", "Close", id="help.close")]

    def __init__(self, bindings: list[Binding], lots: list[dict] | None = None,
                 question: str = "", over: bool = False):
        super().__init__(classes="modal")
        self.bindings_shown = bindings
        self.over = over  # the campaign is finished and wrapped up
        self.lots = lots or []
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide", id="help-dialog"):
            with VerticalScroll(id="help-scroll"):
                if self.question:  # the header cuts a long one at 80 columns: whole here
                    yield Static("The question", classes="dialog-title")
                    yield Static(for_terminal(self.question), classes="dialog-body",
                                 markup=False, id="help-question")
                yield Static("Keys", classes="dialog-title")
                yield Static(two_columns(key_rows(self.bindings_shown, self.over), 9),
                             classes="dialog-body", id="help-keys")
                yield Static("What the room draws", classes="dialog-title")
                yield Static(two_columns(SYMBOLS, 11), classes="dialog-body",
                             id="help-symbols")
                if self.lots:
                    yield Static("\n".join(
                        f"  lot {lot['lot']}: {lot['gpu']} x{lot['gpus']}, "
                        f"{lot['price_usd']:.2f} USD, order {lot['order'] or '(none given)'}"
                        for lot in self.lots), classes="dialog-body", markup=False,
                        id="help-lots")
                yield Static(LEGEND_LINE, classes="dialog-body", markup=False,
                             id="help-legend")
            yield Static("↑/↓ pgup/pgdn scroll · esc close", classes="dialog-keys",
                         markup=False, id="help-close")

    def on_mount(self) -> None:
        self.query_one("#help-scroll").focus()

    def text(self) -> str:
        """What the help says, one `mark meaning` a line (tests)."""
        return "\n".join(f"{left} {right}" for left, right
                         in key_rows(self.bindings_shown, self.over) + list(SYMBOLS))

    def action_close(self) -> None:
        self.dismiss(None)
