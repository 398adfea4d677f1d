"""What `itera-tui check` prints: calendar table, text timeline, fit, cost, advice.

One function builds the JSON-able summary, another renders it as text, so the
two faces of `check` can never disagree. Beside the calendar: what each
variant changes against the control (ablation), paths two variants would both
write, each lot's order reference and, with a prior bundle, the calibrated
duration beside each hand-written one.
"""

from __future__ import annotations

from .ablation import ablation, render_ablation
from .advice import advise
from .boxes import box_shares, render_boxes, share_warnings
from .calendar import Calendar, build_calendar
from .collisions import shared_output_paths
from .plan import Plan
from .pricing import plan_cost
from .retry import retry_line
from .rule_warnings import divergence_lines, gpu_idle_lines, rule_warnings, startup_lines
from .units import short_hours


def check_summary(plan: Plan, calendar: Calendar | None = None, findings=()) -> dict:
    """`findings`: tui.campaign.preflight's warnings (its errors are bad input)."""
    cal = calendar or build_calendar(plan)
    cost = plan_cost(plan)
    return {
        "campaign": plan.campaign.name,
        "question": plan.campaign.question,
        "window_hours": round(cal.window_hours, 4),
        "end_to_end_hours": round(cal.end_to_end_hours, 4),
        "machine_hours": round(cal.machine_hours, 4),
        "gpu_hours": round(cal.gpu_hours, 4),
        "human_hours": round(cal.human_hours, 4),
        "slack_hours": round(cal.slack_hours, 4),
        "fits": cal.fits,
        "lot_overruns": cal.lot_overruns,
        "over_hours": round(cal.over_hours, 4),
        "longest_chain_hours": round(cal.longest_chain_hours, 4),
        "critical_path": list(cal.critical_path),
        "latest_start_hours": {k: round(v, 4) for k, v in cal.latest_starts(plan).items()},
        "cost_usd": cost.to_dict(),
        "lots": [{"id": l.id, "gpu": l.gpu, "gpus": l.gpus, "hours": l.hours,
                  "price_usd": l.price_usd, "price_source": l.price_source,
                  "order": l.order} for l in plan.lots],
        "expenses": [{"name": e.name, "usd": e.usd} for e in plan.expenses],
        "calendar": [e.to_dict() for e in cal.entries],
        "advice": advise(plan, cal),
        "ablation": ablation(plan).to_dict(),
        "shared_paths": [w.to_dict() for w in shared_output_paths(
            plan, plan.root if plan.root.is_dir() else None)],
        "calibration": plan.calibration.to_dict() if plan.calibration else None,
        "rule_warnings": rule_warnings(plan),
        "startup_limits": startup_lines(plan),
        "divergence_limits": divergence_lines(plan),
        "gpu_idle_limits": gpu_idle_lines(plan),
        "retry": retry_lines(plan, cal),
        "findings": [f.to_dict() for f in findings],
        "boxes": [b.to_dict() for b in box_shares(plan, cal)],
        "box_warnings": share_warnings(plan, cal),
        "store": _store(plan),
        "box_end": _box_end(plan),
    }


def retry_lines(plan: Plan, cal: Calendar) -> list[str]:
    """What `[retry]` retries, campaign-wide and for each variant that overrides it, and
    whether the calendar's slack could hold a retry of the longest run it covers."""
    out = [retry_line(plan.retry, "[retry]")]
    out += [retry_line(v.retry, f"variant {v.id}") for v in plan.variants
            if v.retry != plan.retry]
    covered = [v for v in plan.variants if v.retry is not None and v.retry.active]
    longest = max(covered, key=lambda v: v.hours, default=None)
    if longest is not None and cal.slack_hours < longest.hours:
        out.append(f"the calendar's slack ({short_hours(max(0.0, cal.slack_hours))}) is "
                   f"shorter than {longest.id}'s full run ({short_hours(longest.hours)}): a "
                   "retry from the start would not fit, one from a late checkpoint may")
    return [line for line in out if line]


def _box_end(plan: Plan) -> dict:
    """What announces the box's end to the engine: the system's SIGTERM always, and a
    provider's notice with `[engine] preemption`."""
    return {"preemption": plan.preemption, "grace_s": plan.shutdown_grace_seconds,
            "store": plan.store is not None}


def render_box_end(box_end: dict | None) -> list[str]:
    """Said when something beyond the default is set (a store to resume from, or a
    notice to read): the plain SIGTERM path needs no line of `check` of its own."""
    if not box_end or not (box_end.get("store") or box_end.get("preemption")):
        return []
    from .loading.load import PREEMPTION_POLL_S, preemption_source

    source = box_end.get("preemption")
    where = ("" if not source else f" or a preemption notice ({preemption_source(source)}, "
             f"read every {PREEMPTION_POLL_S:g} s)")
    return [f"box end: a SIGTERM from the system{where} has every live run checkpoint "
            f"within {hours_text(box_end['grace_s'] / 3600)}, then the engine goes; "
            + ("`itera-tui resume URL` continues on a new box" if box_end.get("store") else
               "`itera-tui` continues on this box after a reboot (on a new box only with "
               "[store])")]


def _store(plan: Plan) -> dict | None:
    """[store]: where the campaign is kept off the box, and the delivery interval."""
    st = plan.store
    if st is None:
        return None
    return {"url": st.url, "options": sorted(k for k, _ in st.options),
            "bundle_mb": st.bundle_mb, "delivery_hours": st.delivery_hours,
            "measured": None}


def render_store(store: dict | None) -> list[str]:
    if not store:
        return []
    keys = f" (options: {', '.join(store['options'])})" if store["options"] else ""
    out = [f"store: {store['url']}{keys}: the ledger, verified checkpoints, logs and each "
           "finished run's results mirrored as they happen; the bundle delivered and "
           "verified there before the window ends"]
    m = store.get("measured")
    if m:
        out.append(f"  measured: write {m['write_mb_s']:.3g} MB/s, read {m['read_mb_s']:.3g} "
                   f"MB/s, {m['request_s'] * 1000:.0f} ms a request "
                   f"({m['probe_bytes'] / 1e6:.3g} MB round trip)")
    if store.get("delivery_hours") is not None:
        size = f"{store['bundle_mb']:g} MB bundle" if store.get("bundle_mb") else "the bundle"
        out.append(f"  delivery of {size}: {hours_text(store['delivery_hours'])} "
                   "(upload + read-back verification; the calendar's last interval)")
    elif store.get("error"):
        out.append(f"  not measured: {store['error']}")
    else:
        out.append("  delivery not measured: `itera-tui check --store` times the store "
                   "(with [store] bundle_mb, the expected bundle size)")
    return out


hours_text = short_hours


def render_timeline(summary: dict, width: int = 48) -> list[str]:
    span = max(summary["window_hours"], summary["end_to_end_hours"], 1e-9)
    window_col = round(summary["window_hours"] / span * width)
    lines = []
    for e in summary["calendar"]:
        a = round(e["start_hours"] / span * width)
        b = max(a + (1 if e["hours"] > 0 else 0), round(e["end_hours"] / span * width))
        mark = "#" if e["who"] == "machine" else "~"
        bar = [" "] * (width + 1)
        for i in range(a, min(b, width + 1)):
            bar[i] = mark
        if window_col <= width:
            bar[window_col] = "|" if bar[window_col] == " " else "!"
        lines.append(f"  {e['label'][:18]:<18} {''.join(bar)}")
    lines.append(f"  {'':<18} # machine  ~ human  | window end")
    return lines


def render_check(summary: dict) -> str:
    out = [f"campaign  {summary['campaign']}", f"question  {summary['question']}", ""]
    out.append(f"  {'interval':<22} {'who':<8} {'start':>8} {'end':>8} {'lanes':<14} "
               f"{'latest':>8}")
    for e in summary["calendar"]:
        lanes = ",".join(e["lanes"]) or "-"
        latest = hours_text(e["latest_start_hours"]) if e["kind"] == "run" else ""
        crit = "*" if e["critical"] else " "
        out.append(f"{crit} {e['label'][:22]:<22} {e['who']:<8} {hours_text(e['start_hours']):>8}"
                   f" {hours_text(e['end_hours']):>8} {lanes[:14]:<14} {latest:>8}")
    out.append("  (* critical path; latest = latest start that still fits the window)")
    out.append("")
    out.extend(render_timeline(summary))
    out.append("")
    fit = "fits" if summary["fits"] else f"DOES NOT FIT: {hours_text(summary['over_hours'])} over"
    out.append(f"window {hours_text(summary['window_hours'])}, end to end "
               f"{hours_text(summary['end_to_end_hours'])}, slack "
               f"{hours_text(summary['slack_hours'])}: {fit}")
    for o in summary["lot_overruns"]:
        out.append(f"  {o['task']} ends at {hours_text(o['end_hours'])}, after lot "
                   f"{o['lot']}'s own window ({hours_text(o['lot_hours'])})")
    out.append(f"machine {hours_text(summary['machine_hours'])}, human "
               f"{hours_text(summary['human_hours'])}")
    cost = summary["cost_usd"]
    lots = ", ".join(f"{l['gpu']} x{l['gpus']} {hours_text(l['hours'])} "
                     f"{l['price_usd']:.2f} USD ({l['price_source']})" for l in summary["lots"])
    out.append(f"cost: lots {cost['lots']:.2f} USD [{lots}]; other expenses "
               f"{cost['expenses']:.2f} USD (apart); total {cost['total']:.2f} USD")
    for a in summary["advice"]:
        out.append(f"advice ({a['kind']}): {a['text']}")
    out += render_boxes(summary)
    out += render_store(summary.get("store"))
    out += render_box_end(summary.get("box_end"))
    out += [f"retry: {text}" for text in summary.get("retry") or []]
    orders = [f"{l['id']}: {l['order']}" for l in summary["lots"] if l.get("order")]
    if orders:
        out.append(f"order references: {'; '.join(orders)}")
    if summary.get("calibration"):
        out += [""] + render_calibration(summary["calibration"])
    out += [""] + render_ablation(ablation_from(summary["ablation"]))
    for w in summary["shared_paths"]:
        out.append(f"warning (paths): {w['text']}")
    for text in [*(summary.get("startup_limits") or []),
                 *(summary.get("divergence_limits") or []),
                 *(summary.get("gpu_idle_limits") or [])]:
        out.append(f"stop rule: {text}")
    for text in summary.get("rule_warnings") or []:
        out.append(f"warning (rules): {text}")
    for f in summary.get("findings", ()):
        out.append(f"{f['level']} ({f['key']}): {f['text']}")
    return "\n".join(out)


def ablation_from(data: dict):
    """The ablation back from its JSON form (render from the summary alone)."""
    from .ablation import Ablation, Change, VariantAblation

    return Ablation(data["control"], tuple(
        VariantAblation(v["variant"], tuple(Change(**c) for c in v["changes"]),
                        tuple(v["warnings"])) for v in data["variants"]),
        tuple(data["warnings"]))


def render_calibration(cal: dict) -> list[str]:
    uses = ("the calendar, fit and advice above use the calibrated durations"
            if cal["used"] == "calibrated" else "the calendar above uses the hand-written "
            "durations (--calibrated, or [campaign] calibrated = true, plans with these)")
    out = [f"calibration from prior {cal['prior']} (campaign \"{cal['prior_campaign']}\", "
           f"manifest {cal['manifest_sha256'][:12]}): {uses}",
           f"  {'interval':<22} {'by hand':>9} {'calibrated':>10} {'difference':>11}  from"]
    for t in cal["tasks"]:
        label = t["task"].replace("pilot:", "pilot ")
        if t["calibrated_hours"] is None:
            out.append(f"  {label[:22]:<22} {hours_text(t['hand_hours']):>9} {'-':>10} "
                       f"{'':>11}  {t['note'] or 'nothing measured matches'}")
            continue
        diff, hand = t["difference_hours"], t["hand_hours"]
        pct = f" {diff / hand:+.0%}" if hand else ""
        fig = t["figures"]
        how = ", ".join(f"{name} {fig[key]:.3g} s" for key, name in FIGURES if key in fig)
        out.append(f"  {label[:22]:<22} {hours_text(hand):>9} "
                   f"{_fine(t['calibrated_hours']):>10} "
                   f"{('+' if diff >= 0 else '-') + hours_text(abs(diff)):>11}{pct}  "
                   f"{t['source']} ({t['matched_by']}){': ' + how if how else ''}"
                   + (f"; {t['note']}" if t["note"] else ""))
    return out


def _fine(hours: float) -> str:
    """A calibrated duration of a few seconds keeps its tenths."""
    return f"{hours * 3600:.1f} s" if hours * 3600 < 10 else hours_text(hours)


FIGURES = (("startup_s", "start-up"), ("step_s", "per step"), ("validation_s", "per validation"),
           ("checkpoint_s", "per checkpoint"), ("tail_s", "tail"))
