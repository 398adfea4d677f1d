"""How often to checkpoint: Young's interval from the measured write cost.

Young (1974): the interval that minimises expected lost work plus checkpoint
overhead is sqrt(2 x cost x MTBF). A user can also bound the work they are
willing to lose (`tolerable_loss_minutes`): a failure loses half an interval
on average, so the interval is capped at twice that bound.
"""

from __future__ import annotations

import math

DEFAULT_INTERVAL_MINUTES = 30.0


def young_interval_minutes(write_cost_s: float, mtbf_hours: float) -> float:
    return math.sqrt(2.0 * max(write_cost_s, 0.0) * mtbf_hours * 3600.0) / 60.0


def checkpoint_interval_minutes(checkpoint, measured_write_s: float | None) -> float | None:
    """Interval in minutes for a plan's [checkpoint] section; None: no schedule."""
    if checkpoint.every_minutes is not None and not checkpoint.auto:
        return checkpoint.every_minutes
    if not checkpoint.auto:
        return None
    cap = 2.0 * checkpoint.tolerable_loss_minutes if checkpoint.tolerable_loss_minutes else None
    if measured_write_s is None:
        return cap or DEFAULT_INTERVAL_MINUTES
    young = young_interval_minutes(measured_write_s, checkpoint.mtbf_hours)
    interval = min(young, cap) if cap else young
    return max(interval, 0.05)  # never hammer the disk more than every 3 s
