"""The decision point after the pilot: the pilot figures next to the threshold.

Continue, drop an optional variant, or wrap up (revise the question) — one key
each. The figures are those the engine froze in its `decision_pending` event,
so the modal shows exactly what the ledger will say the decision was based on.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from ...campaign.ablation import ablation, variant_lines
from ...engine.records import StopRecord
from ..format import number
from ..rows import stop_short


def threshold_line(plan) -> str:
    c = plan.campaign
    better = ">=" if c.direction == "max" else "<="
    against = "the control" if c.control == "control" else f"the control ({c.control})"
    parts = [f"decision metric {c.metric} ({c.direction}); gain {better} "
             f"{c.min_gain:g} vs {against}"]
    if c.threshold is not None:
        parts.append(f"threshold {c.metric} {better} {c.threshold:g}")
    return "; ".join(parts)


def verdict(plan, value, control_value) -> str:
    """'meets' / 'below' against the threshold and the control (pilot figures)."""
    c = plan.campaign
    if value is None:
        return "no metric"
    sign = 1 if c.direction == "max" else -1
    if c.threshold is not None and sign * (value - c.threshold) < 0:
        return "misses threshold"
    if control_value is None:
        return "—"
    gain = sign * (value - control_value)
    return f"gain {gain:+.4g} " + ("meets" if gain >= c.min_gain - 1e-12 else "below")


def pilot_table(plan, pilot: dict) -> str:
    control = (pilot.get(plan.campaign.control) or {}).get("metric")
    rows = [f"{'variant':<12} {'cat':<3} {'state':<14} {'step':>6} {'loss':>7} "
            f"{plan.campaign.metric[:7]:>7}  verdict"]
    for v in plan.variants:
        fig = pilot.get(v.id)
        if fig is None:
            rows.append(f"{v.id[:12]:<12} {v.category[:3]:<3} {'no pilot':<14}")
            continue
        state = (f"✕ {stop_short(StopRecord.from_event(fig['stop']))}" if fig.get("stop")
                 else fig.get("state", ""))
        vd = "control" if v.id == plan.campaign.control else verdict(plan, fig.get("metric"),
                                                                     control)
        rows.append(f"{v.id[:12]:<12} {v.category[:3]:<3} {state[:14]:<14} "
                    f"{number(fig.get('step')):>6} {number(fig.get('last_loss')):>7} "
                    f"{number(fig.get('metric')):>7}  {vd}")
    return "\n".join(rows)


def ablation_text(plan, limit: int = 4) -> str:
    """What each variant changes against the control, and the method's warnings."""
    result = ablation(plan)
    lines = [line for v in plan.variants if v.id != plan.campaign.control
             for line in variant_lines(result, v.id)]
    return "\n".join(lines[:limit] + ([f"… {len(lines) - limit} more in `itera-tui check`"]
                                      if len(lines) > limit else []))


class DecisionScreen(ModalScreen[str | None]):
    BINDINGS = [
        Binding("c", "choose('continue')", "Continue", id="decision.continue"),
        Binding("d", "choose('drop')", "Drop a variant", id="decision.drop"),
        Binding("w", "choose('wrapup')", "Wrap up", id="decision.wrapup"),
        Binding("escape", "choose(None)", "Later", id="decision.later"),
    ]

    def __init__(self, plan, pending: dict):
        super().__init__(classes="modal")
        self.plan = plan
        self.pending = pending

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog wide", id="decision-dialog"):
            yield Static("Decision point: the pilot is done", classes="dialog-title")
            yield Static(threshold_line(self.plan), classes="dialog-body", markup=False)
            yield Static(pilot_table(self.plan, self.pending.pilot),
                         id="pilot-figures", markup=False)
            yield Static(ablation_text(self.plan), id="ablation", classes="dialog-body",
                         markup=False)
            yield Static("[c] continue   [d] drop a variant   [w] wrap up   [esc] later",
                         classes="dialog-keys", markup=False)

    def action_choose(self, choice: str | None) -> None:
        self.dismiss(choice)
