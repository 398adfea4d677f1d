"""What the HF and Lightning callbacks share: joining the run, turning a
framework's metrics into SDK records, and the step budget of ITERA_MAX_STEPS.

Frameworks hand callbacks loosely typed metrics (floats, 0-d tensors, numpy
scalars, sometimes already formatted strings, plus non-numeric entries); the
engine's stop rules need plain numbers, with NaN kept as NaN. Both callbacks
also must be inert outside itera-tui, so joining the run happens here, once.
Imports no framework and no torch.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from .. import training

RESERVED = frozenset({"t", "step", "event"})  # the record's own keys in the metrics stream


def warn(message: str) -> None:
    print(f"itera-tui: {message}", file=sys.stderr, flush=True)


def join_run(env=None) -> training.Run | None:
    """The SDK run when launched by itera-tui (ITERA_RUN_DIR set), else None.

    Joined in the callback's constructor, so that on SIGTERM the SDK's flag is
    set (the process keeps going until the callback stops the trainer at a step
    boundary) and frameworks that chain signal handlers (Lightning) keep ours."""
    env = os.environ if env is None else env
    if not env.get("ITERA_RUN_DIR"):
        return None
    return training.attach(env=env)


def as_number(value) -> float | int | None:
    """A metric value as a plain number, or None when it is not one.

    NaN and infinities are kept (the `non_finite` rule must see them); numeric
    strings ("nan", "2.31") are read because some loggers format in place."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    item = getattr(value, "item", None)
    if callable(item) and getattr(value, "ndim", None) == 0 and getattr(value, "numel", lambda: 1)() == 1:
        try:
            plain = item()
        except (TypeError, ValueError, RuntimeError):
            return None
        return plain if isinstance(plain, (int, float)) and not isinstance(plain, bool) else None
    return None


def scalar_metrics(values: Mapping | None) -> dict:
    """The numeric entries of a framework's metrics, ready for `Run.log`."""
    out = {}
    for name, value in (values or {}).items():
        if not isinstance(name, str) or name in RESERVED:
            continue
        number = as_number(value)
        if number is not None:
            out[name] = number
    return out
