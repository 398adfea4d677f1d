"""Stop rules that will not see what they are meant to catch, said at `check`.

Hugging Face's `Trainer` prints its log dicts with `logging_nan_inf_filter` on by
default: a NaN or inf step loss is replaced by the running average before it is
logged, so the printed `loss` of a diverged run stays a plausible number. A
campaign read through `preset = "hf_trainer"` whose `non_finite` rule watches
`loss` alone would let that run complete. Advice, never an error (the script
may set `logging_nan_inf_filter=False` itself, or use the one-line callback,
which turns it off). Beside them, `startup_lines`: what each `stall` rule allows a
process before its first record, the default included, `divergence_lines`: the
bound each `diverged` rule sets, and `gpu_idle_lines`: what each `gpu_idle` rule
watches, or that it has no effect on a CPU lot. Stdlib only.
"""

from __future__ import annotations

from .plan import DEFAULT_STARTUP_MINUTES, Plan


def rule_warnings(plan: Plan) -> list[str]:
    out = []
    if plan.metrics.preset == "hf_trainer":
        for rule in plan.stops:
            if rule.rule != "non_finite":
                continue
            watched = rule.metrics or plan.metrics.watch
            if set(watched) == {"loss"}:
                out.append("non_finite watches only loss, but under preset = \"hf_trainer\" "
                           "HF prints the loss with logging_nan_inf_filter on: a NaN loss is "
                           "printed as the running average, never as nan; add grad_norm "
                           "(metrics = [\"loss\", \"grad_norm\"]), or use the one-line "
                           "callback (tui.integrations.hf.IteraCallback), which turns the "
                           "filter off")
    return out


def startup_lines(plan: Plan) -> list[str]:
    """What each `stall` rule allows a process before its first record, said at `check`
    so the default is never a surprise: the stall clock starts at the first record, and
    before it the start-up limit applies (its stop is named "start-up")."""
    out = []
    for rule in plan.stops:
        if rule.rule != "stall":
            continue
        which = (f"startup_minutes = {rule.startup_minutes:g}" if rule.startup_minutes
                 is not None else f"default: {DEFAULT_STARTUP_MINUTES:g} min or the stall "
                 "limit if longer; set [[stop]] startup_minutes")
        runs = ", ".join(rule.variants) if rule.variants else "every run"
        out.append(f"stall ({runs}): {rule.minutes:g} min without a record, counted from the "
                   f"first record; before it the start-up limit is "
                   f"{rule.startup_limit_minutes:g} min ({which}), its stop named \"start-up\"")
    return out


def divergence_lines(plan: Plan) -> list[str]:
    """What each `diverged` rule stops, said at `check`: its bound is relative to each
    run's own first figures, so no number in the plan says where it lies."""
    out = []
    for rule in plan.stops:
        if rule.rule != "diverged":
            continue
        runs = ", ".join(rule.variants) if rule.variants else "every run"
        out.append(f"diverged ({runs}): {rule.metric} above {rule.factor:g} x the median of "
                   f"the run's first {rule.baseline_records} finite {rule.metric} figures "
                   "stops it, even while it stays finite (a run whose baseline is 0 or "
                   "below is not judged)")
    return out


def gpu_idle_lines(plan: Plan) -> list[str]:
    """What each `gpu_idle` rule watches, said at `check`; on a plan whose lots are all
    `gpu = "CPU"` it has nothing to watch, and `check` says so rather than let a person
    believe the idle hours are guarded."""
    out = []
    cpu_only = bool(plan.lots) and all(lot.cpu for lot in plan.lots)
    cpu_lots = [lot.id for lot in plan.lots if lot.cpu]
    for rule in plan.stops:
        if rule.rule != "gpu_idle":
            continue
        runs = ", ".join(rule.variants) if rule.variants else "every run"
        if cpu_only:
            out.append(f"gpu_idle ({runs}): no effect here: every lot is gpu = \"CPU\", "
                       "there is no GPU utilisation to watch")
            continue
        text = (f"gpu_idle ({runs}): a run whose own GPUs (its lanes' devices, and any GPU "
                f"NVML lists one of its processes on) all stay under "
                f"{rule.below_percent:g} % utilisation in every NVML sample for "
                f"{rule.minutes:g} min is asked for a checkpoint and stopped, named "
                "\"GPU idle\"")
        if cpu_lots:
            text += f"; no effect on the CPU lot{'s' if len(cpu_lots) > 1 else ''} " \
                    f"{', '.join(cpu_lots)}"
        out.append(text)
    return out
