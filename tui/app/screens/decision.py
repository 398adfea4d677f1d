"""The decision point after the pilot: the pilot figures next to the bar to clear.

Continue, drop optional variants, or wrap up (revise the question): one key
each. The figures follow the room's one rule (the decision metric's final
value, the step a rule fired at; `pilot_figures.py`), and variants whose
pilot a stop rule ended are suggested for dropping, with the rule.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from ...campaign.ablation import ablation, variant_lines
from ...engine.conclusion.outcome import bar_words
from ..data_check_view import truncation_text
from ..pilot_figures import pilot_rows, pilot_table, problem_lines, suggestion_lines

TABLE_W = 74  # inside the 78-column dialog (border and padding)


def threshold_line(plan) -> str:
    """The bar the pilot figures are read against, in the words the verdict uses: the
    gain is counted in the better direction (a lower val_loss is a positive gain),
    so it is ">=" for a "min" metric too, as the figures' "gain +0.16 meets" says."""
    c = plan.campaign
    against = "the control" if c.control == "control" else f"the control ({c.control})"
    better = "higher" if c.direction == "max" else "lower"
    return (f"decision metric {c.metric} ({c.direction}, its final value; gain: how much "
            f"{better} than {against}); the bar: {bar_words(plan)}")


def ablation_text(plan, limit: int | None = None) -> str:
    """What each variant changes against the control, and the method's warnings."""
    result = ablation(plan)
    lines = [line for v in plan.variants if v.id != plan.campaign.control
             for line in variant_lines(result, v.id)]
    if limit is None or len(lines) <= limit:  # the dialog scrolls: all of them by default
        return "\n".join(lines)
    return "\n".join(lines[:limit] + [f"… {len(lines) - limit} more in `itera-tui check`"])


class DecisionScreen(ModalScreen[str | None]):
    BINDINGS = [
        Binding("c", "choose('continue')", "Continue", id="decision.continue"),
        Binding("d", "choose('drop')", "Drop variants", id="decision.drop"),
        Binding("w", "choose('wrapup')", "Wrap up", id="decision.wrapup"),
        Binding("escape", "choose(None)", "Later", id="decision.later"),
    ]

    def __init__(self, plan, pending, room):
        super().__init__(classes="modal")
        self.plan = plan
        self.pending = pending
        self.rows = pilot_rows(plan, pending, room)
        self.truncation = truncation_text(plan, room.state)

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide", id="decision-dialog"):
            yield Static("Decision point: the pilot is done", classes="dialog-title")
            with VerticalScroll(id="decision-scroll"):  # many variants: it scrolls
                yield Static(threshold_line(self.plan), classes="dialog-body", markup=False)
                yield Static(pilot_table(self.plan, self.rows, TABLE_W), id="pilot-figures",
                             markup=False)
                suggested = problem_lines(self.plan, self.rows, self.pending) \
                    + suggestion_lines(self.rows)
                if suggested:
                    yield Static("\n".join(suggested), id="suggested", markup=False)
                yield Static(ablation_text(self.plan), id="ablation", classes="dialog-body",
                             markup=False)
                if self.truncation:
                    yield Static(self.truncation, id="truncation", classes="dialog-body",
                                 markup=False)
            yield Static("[c] continue   [d] drop variants   [w] wrap up   [esc] later   ↑/↓ scroll",
                         classes="dialog-keys", markup=False)

    def on_mount(self) -> None:
        self.query_one("#decision-scroll").focus()

    def action_choose(self, choice: str | None) -> None:
        self.dismiss(choice)
