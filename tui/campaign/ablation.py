"""What each variant changes against the control, and when a plan cannot isolate a cause.

The method behind the product: a variant that changes one factor against the
control isolates a cause; one that changes several cannot; two variants with
the same configuration answer the same question twice; and launching every
combination of several factors at once (a full grid) is what a campaign with
a fixed window should not do. This module reads the plan only (params,
command arguments, GPUs) and says so. It is advice, never an error: a
campaign may choose otherwise.

A factor is a parameter or a command option, named without its leading dashes
and with `-` read as `_` (`--hidden-size` and the param `hidden_size` are one
factor), so a param and the option that passes it count once. A value that
names the variant itself (`--label wide`, `--out runs/wide`) is a name, not a
factor: the variant's id in it is read as `{id}` on both sides. Positional
arguments are `argv[0]` (the script), `argv[1]`, ...: what launches the
script (`python`, `env VAR=...`, `torchrun`, `accelerate launch`) is not a
factor (`factors.script_argv`). An option followed by a non-option takes it
as its value, otherwise it is a flag (`"true"`). The usual aliases
of a fine-tune's factors (`r`/`lora_r` is `rank`, `learning_rate` is `lr`...)
are one factor each: see `factors`.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from .factors import command_factors, factor_name, fold_precision, script_argv
from .plan import Plan, Variant

__all__ = ["Ablation", "Change", "VariantAblation", "ablation", "command_factors",
           "config_factors", "factor_name", "render_ablation", "variant_lines"]

MAX_GRID_FACTORS = 8  # beyond this many changed factors, grids are not searched


@dataclass(frozen=True)
class Change:
    factor: str  # normalised name: "lr", "hidden", "argv[1]", "gpus"
    where: str  # "params" | "command" | "params+command" | "gpus"
    control: Any  # the control's value (None: absent there)
    variant: Any  # this variant's value (None: absent here)

    def text(self) -> str:
        return f"{self.factor} {_show(self.control)} -> {_show(self.variant)}"

    def to_dict(self) -> dict:
        return {"factor": self.factor, "where": self.where, "control": _plain(self.control),
                "variant": _plain(self.variant)}


@dataclass(frozen=True)
class VariantAblation:
    variant: str
    changes: tuple[Change, ...]
    warnings: tuple[str, ...]

    def to_dict(self) -> dict:
        return {"variant": self.variant, "changes": [c.to_dict() for c in self.changes],
                "warnings": list(self.warnings)}


@dataclass(frozen=True)
class Ablation:
    control: str
    variants: tuple[VariantAblation, ...]  # every variant but the control
    warnings: tuple[str, ...]  # every warning, plan-wide ones included

    def of(self, variant_id: str) -> VariantAblation | None:
        return self._by_id.get(variant_id)  # a dict: `check` asks once per variant

    @cached_property
    def _by_id(self) -> dict[str, VariantAblation]:
        return {v.variant: v for v in reversed(self.variants)}

    def to_dict(self) -> dict:
        return {"control": self.control, "variants": [v.to_dict() for v in self.variants],
                "warnings": list(self.warnings)}


def _unname(value: Any, own_id: str) -> Any:
    """The variant's own id inside a value is a name, not a factor."""
    if not isinstance(value, str) or not own_id or own_id not in value:
        return value  # the common case: no regex compiled per variant
    return re.sub(rf"(?<![A-Za-z0-9]){re.escape(own_id)}(?![A-Za-z0-9])", "{id}", value)


def config_factors(v: Variant) -> dict[str, tuple[str, Any]]:
    """factor -> (where, value) for one variant: params, command, GPUs."""
    out: dict[str, tuple[str, Any]] = {}
    for key, value in command_factors(script_argv(v.command)).items():
        out[key] = ("command", _unname(value, v.id))
    for key, value in v.params:
        name = factor_name(key)
        where = "params+command" if name in out else "params"
        out[name] = (where, _unname(value, v.id))
    fold_precision(out)
    out["gpus"] = ("gpus", v.gpus)
    return out


def _same(a: Any, b: Any) -> bool:
    """A param 3e-3 and its option "3e-3" are the same value."""
    if a == b:
        return True
    try:
        return float(a) == float(b) and not isinstance(a, bool) and not isinstance(b, bool)
    except (TypeError, ValueError):
        return str(a) == str(b)


def changes_against(control: dict, variant: dict) -> tuple[Change, ...]:
    out = []
    for name in sorted(control.keys() | variant.keys()):
        c_where, c_val = control.get(name, ("", None))
        v_where, v_val = variant.get(name, ("", None))
        if _same(c_val, v_val):
            continue
        where = v_where or c_where
        if "+" in c_where or "+" in v_where:
            where = "params+command"
        out.append(Change(name, where, c_val, v_val))
    return tuple(out)


def ablation(plan: Plan) -> Ablation:
    """Per variant, its changes against the control and the warnings they raise."""
    configs = {v.id: config_factors(v) for v in plan.variants}
    control_id = plan.campaign.control
    control = configs.get(control_id, {})
    per: dict[str, list[str]] = {v.id: [] for v in plan.variants}
    changes: dict[str, tuple[Change, ...]] = {}
    for v in plan.variants:
        if v.id == control_id:
            continue
        changes[v.id] = changes_against(control, configs[v.id])
        factors = [c.factor for c in changes[v.id]]
        if len(factors) > 1:
            per[v.id].append(f"{v.id} changes {len(factors)} factors against the control "
                             f"({', '.join(factors)}): it cannot isolate a cause")
    plan_wide = _identical(plan, configs, per) + _grids(plan, configs, control, changes)
    variants = tuple(VariantAblation(v.id, changes[v.id], tuple(per[v.id]))
                     for v in plan.variants if v.id != control_id)
    every = [w for v in plan.variants for w in per[v.id]]
    return Ablation(control_id, variants, tuple(dict.fromkeys(every + plan_wide)))


def _canon(value: Any) -> tuple:
    """A value as _same compares it, hashable: 3e-3 and "3e-3" give one key."""
    try:
        return ("b", value) if isinstance(value, bool) else ("n", float(value))
    except (TypeError, ValueError):
        return ("s", str(value))


def config_key(config: dict) -> tuple:
    """One hashable key per configuration (a factor it lacks compares as None)."""
    return tuple(sorted((name, key) for name, (_, value) in config.items()
                        if (key := _canon(value)) != ("s", "None")))


def _identical(plan: Plan, configs: dict, per: dict) -> list[str]:
    """Twins grouped by config_key: linear (every pair took 46 s for 2 000 variants)."""
    groups: dict[tuple, list[str]] = {}
    for v in plan.variants:
        groups.setdefault(config_key(configs[v.id]), []).append(v.id)
    out = []
    for group in groups.values():
        if len(group) < 2:
            continue
        text = (f"{', '.join(group)} are identical in config (command, params, GPUs): "
                "they test one configuration and count once")
        out.append(text)
        for vid in group:
            per[vid].append(text)
    return out


def _grids(plan: Plan, configs: dict, control: dict, changes: dict) -> list[str]:
    """Full grids: over some factors, every combination of their values is planned."""
    factors = sorted({c.factor for chs in changes.values() for c in chs})
    if len(factors) < 2 or len(factors) > MAX_GRID_FACTORS:
        return []
    found: list[tuple[frozenset, list[str]]] = []
    for size in range(len(factors), 1, -1):
        for subset in itertools.combinations(factors, size):
            if any(set(subset) <= grid for grid, _ in found):
                continue
            grid = _grid_members(plan, configs, control, set(subset))
            if grid:
                found.append((frozenset(subset), grid))
    out = []
    for subset, (sizes, members) in found:
        names = sorted(subset)
        shape = "x".join(str(n) for n in sizes)
        out.append(f"{', '.join(members)} form a full {shape} grid of "
                   f"{' x '.join(names)}: the method says not to launch every combination "
                   "at once; vary one factor at a time against the control first")
    return out


def _grid_members(plan: Plan, configs: dict, control: dict,
                  subset: set) -> tuple[list[int], list[str]] | None:
    """(values per factor, variants) when the variants that differ from the control
    only on `subset` cover every combination of those factors' values."""
    rows = {}
    for v in plan.variants:
        cfg = configs[v.id]
        outside = {k for k in cfg.keys() | control.keys() if k not in subset}
        if any(not _same(cfg.get(k, ("", None))[1], control.get(k, ("", None))[1])
               for k in outside):
            continue
        key = tuple(repr(cfg.get(k, ("", None))[1]) for k in sorted(subset))
        rows.setdefault(key, v.id)
    names = sorted(subset)
    values = [{key[i] for key in rows} for i in range(len(names))]
    sizes = [len(vals) for vals in values]
    if min(sizes) < 2:
        return None
    total = 1
    for n in sizes:
        total *= n
    if len(rows) != total:
        return None
    return sizes, sorted(rows.values(), key=[v.id for v in plan.variants].index)


def variant_lines(result: Ablation, variant_id: str) -> list[str]:
    """Short lines for one variant (the decision modal, `check`): changes, then warnings."""
    if variant_id == result.control:
        return [f"{variant_id}: the control"]
    v = result.of(variant_id)
    if v is None:
        return []
    what = "; ".join(c.text() for c in v.changes) or "nothing (same config as the control)"
    return [f"{variant_id}: {what}"] + [f"  ! {w}" for w in v.warnings]


def render_ablation(result: Ablation) -> list[str]:
    lines = [f"ablation against the control ({result.control}):"]
    if not result.variants:
        lines.append("  no variant besides the control")
    for v in result.variants:
        lines += ["  " + line for line in variant_lines(result, v.variant)]
    per_variant = {w for v in result.variants for w in v.warnings}
    lines += [f"  ! {w}" for w in result.warnings if w not in per_variant]
    return lines


def _show(value: Any) -> str:
    if value is None:
        return "(absent)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _plain(value: Any) -> Any:
    """JSON-able as it is (TOML also has dates and times: those become text)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)
