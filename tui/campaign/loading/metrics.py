"""Read the `[metrics]` section: printed patterns, a preset, TensorBoard files.

Kept apart from `load.py` because `[metrics]` is a small language of its own
(a regex per metric, optionally restricted to one stream, a preset merged
underneath, a glob and a tag table) and the engine's feeds depend on exactly
what it accepts. Every problem names its key, like the rest of the loader.
"""

from __future__ import annotations

import importlib.util
import re
from dataclasses import replace
from pathlib import Path

from ..plan import STREAMS, MetricPattern, MetricsSpec, StopRule
from ..presets import PRESETS, build_spec
from ..validate import Reader, describe

SETTINGS = ("preset", "tensorboard", "tags")  # every other key of [metrics] names a metric
RESERVED = ("t", "event", "source", "global_step", "record")  # record fields the engine itself sets
STREAM_CHOICES = {"both": STREAMS, "stdout": ("stdout",), "stderr": ("stderr",)}


def read_metrics(table, problems: list[str]) -> MetricsSpec:
    r = Reader(table, "metrics", problems)
    preset = r.get_str("preset", choices=tuple(PRESETS))
    tensorboard = _tensorboard_glob(r)
    tags = []
    for tag, name in (r.get_table("tags") or {}).items():
        if not isinstance(name, str) or not name:
            r.problem(f'tags."{tag}"', f"expected the metric name to read this tag as, got "
                      f"{describe(name)}")
        else:
            tags.append((tag, name))
    patterns = []
    for name in [n for n in r.table if n not in SETTINGS]:
        if name in RESERVED:
            r.problem(name, f"reserved: the engine sets {', '.join(RESERVED)} itself")
            continue
        pattern = _pattern(r, name, r.table[name])
        if pattern is not None:
            patterns.append(pattern)
    return build_spec(preset, tuple(patterns), tensorboard, tuple(tags))


def with_watch_defaults(stops: tuple[StopRule, ...], metrics: MetricsSpec) -> tuple[StopRule, ...]:
    """A `non_finite` rule that names no metrics watches the preset's (else `loss`)."""
    return tuple(replace(s, metrics=metrics.watch) if s.rule == "non_finite" and not s.metrics
                 else s for s in stops)


def _tensorboard_glob(r: Reader) -> str | None:
    glob = r.get_str("tensorboard")
    if glob is None:
        return None
    if not glob or Path(glob).is_absolute() or ".." in Path(glob).parts:
        r.problem("tensorboard", 'a glob relative to the run directory, e.g. '
                  '"lightning_logs/**/events.out.tfevents.*" (no "..", not absolute)')
        return None
    if importlib.util.find_spec("tensorboard") is None:
        r.problem("tensorboard", "reading TensorBoard event files needs the tensorboard "
                  "package: pip install 'itera-tui[tensorboard]'")
        return None
    return glob


def _pattern(r: Reader, name: str, value) -> MetricPattern | None:
    streams = STREAMS
    if isinstance(value, dict):
        sub = Reader(value, f"metrics.{name}", r.problems)
        value = sub.get_str("pattern", required=True)
        stream = sub.get_str("stream", "both", choices=tuple(STREAM_CHOICES))
        streams = STREAM_CHOICES.get(stream or "both", STREAMS)
        sub.reject_unknown(("pattern", "stream"))
        if value is None:
            return None
    elif not isinstance(value, str):
        r.problem(name, "expected a regex string or a table { pattern = '...', stream = "
                  f'"stdout"|"stderr"|"both" }}, got {describe(value)}')
        return None
    try:
        compiled = re.compile(value)
    except re.error as exc:
        r.problem(name, f"not a valid regex: {exc}")
        return None
    if compiled.groups < 1:
        r.problem(name, "the regex needs one capturing group for the value")
        return None
    return MetricPattern(name, value, streams)
