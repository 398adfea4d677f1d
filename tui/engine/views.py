"""The engine's frozen views: what a face draws, light enough for a client to decode.

A client of the engine process (the control room, a room on another box)
rebuilds these records from the wire (`tui.service.codec`); keeping them
here, with no import of the engine's parts, lets it do so without loading
the engine.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ledger.state import CampaignState

ENDED = ("finished", "wrapup", "done", "blocked")  # nothing more will launch: time to wrap up
KIND_WORD = {"pilot": "pilot", "run": "run"}


def run_label(kind: str, target: str, attempt: int = 1) -> str:
    """'control·pilot', 'lora16·run#2', 'data_check': what a person calls a run (the
    room shows it; `itera-tui checkpoint|stop` accept it)."""
    word = KIND_WORD.get(kind)
    label = f"{target}·{word}" if word else target
    return f"{label}#{attempt}" if attempt and attempt > 1 else label


@dataclass(frozen=True)
class LiveView:
    """What the views show of a run, handed over as a frozen snapshot."""

    run_id: str
    records: int
    bad_lines: int  # lines and records that could not be used (counted, skipped)
    last_step: int | None  # the step as the run printed or logged it
    last_loss: float | None
    last_values: dict
    best_metric: float | None
    last_record_t: float | None
    first_record_t: float | None
    loss_history: tuple[tuple[float, float], ...]
    metric_history: tuple[tuple[float, float], ...]
    global_step: int | None = None  # monotonic: for the pilot bound and the charts
    problems: tuple[str, ...] = ()  # a feed that cannot work (e.g. tensorboard missing)
    final_metric: float | None = None  # the last finite value: the one every view shows
    backlog_bytes: int = 0  # output written and not read yet: how far behind the engine is
    skipped_bytes: int = 0  # output jumped over to keep up (never read, never ruled on)
    past_bound: int = 0  # a pilot's records after its bound (or its stop): not in its figures


@dataclass(frozen=True)
class EngineSnapshot:
    """Everything a view needs from the engine, frozen: safe to hand between threads."""

    t: float
    state: CampaignState
    phase: str
    live: dict  # run id -> LiveView
    checkpoint_interval_min: float | None
    finished: bool
    pending_verifications: int = 0
