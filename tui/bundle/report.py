"""report.md: the answer, what it cost, and how the campaign went against its plan.

One page for the person who rented the box: the question and the conclusion,
a line per run, planned vs actual (from the frozen plan and the ledger), the
budget against the useful result (a negative result still costs what it
cost: with zero accepted deliverables the ratio is undefined and the incurred
cost and rejection causes are shown, never a zero cost), the verification
verdict, and how to copy the bundle off the box. Every duration is written in
human units (campaign.units.human_hours: `20 min`, `2 d 3 h`), and the answer is the shared
verdict (tui.engine.conclusion.verdict: yes / no / inconclusive with its reason), stated
against "the bar (gain >= min_gain)"; a threshold is named only when the plan
sets one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..campaign.frozen import edit_note
from ..campaign.plan import Plan
from ..campaign.retrieval import bundle_folder
from ..campaign.pricing import DeliverableBudget
from ..engine.conclusion.outcome import Conclusion
from ..engine.conclusion.verdict import Verdict as Answer
from .actual import PlannedVsActual, utc
from .adapters import report_lines as adapter_report_lines
from .truncation import report_lines as truncation_lines
from .answer import ablation_caveat, answer_text, bar_text
from .plots import Drawing
from ..campaign.units import human_hours as fmt_h
from ..campaign.units import precise_hours, told_apart


@dataclass(frozen=True)
class Verdict:
    verified: bool
    failures: tuple[dict, ...]
    checked: int
    reloaded: int
    non_finite: tuple[dict, ...] = ()  # reloads, but its weights hold NaN or inf


def human_bytes(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _since(pva: PlannedVsActual, t: float | None) -> str:
    """A time and its offset from the campaign's start: `[T+2 min 05 s]`, never `T+-`."""
    start = pva.campaign_start
    if t is None:
        return "-"
    if start is None:
        return utc(t)
    sign = "+" if t >= start else "-"
    return f"{utc(t)} [T{sign}{precise_hours(abs(t - start) / 3600)}]"


def _reserved(pva: PlannedVsActual) -> str:
    """The rental(s) the campaign held: one window, or one per box after a move."""
    if len(pva.rentals) <= 1:
        return (f"{fmt_h(pva.window_hours)} rental window ({utc(pva.window_start)} to "
                f"{utc(pva.window_end)})")
    (s0, h0), moved = pva.rentals[0], pva.rentals[1:]
    return (f"{fmt_h(pva.reserved_hours)} in {len(pva.rentals)} rentals: {fmt_h(h0)} from "
            f"{utc(s0)}, then " + ", then ".join(
                f"{fmt_h(h)} on the box it moved to from {utc(t)}" for t, h in moved)
            + f" (to {utc(pva.window_end)})")


def render(plan: Plan, runs: list[dict], pva: PlannedVsActual, budget: DeliverableBudget,
           conclusion: Conclusion, verdict: Verdict, *, answer: Answer,
           drawing: Drawing | None, size_bytes: int, files: int,
           bundle_rel: str, plan_sha256: str | None, tool_version: str,
           clean: Callable[[str], str] = str, code: dict | None = None,
           store_url: str | None = None) -> str:
    """`clean`: applied to every text that comes from runs or checks (stop reasons,
    deviations, failures), so the report never quotes a path of this machine.
    `store_url`: where the wrap-up delivers the bundle (`[store]`), the way to fetch it
    that needs no box."""
    c = plan.campaign
    out = [f"# {c.name}: campaign report", ""]
    said = answer_text(plan, conclusion, answer)
    out += summary(plan, runs, pva, budget, said, verdict,
                   caveat=ablation_caveat(plan, conclusion, answer))
    out += [f"**Question.** {c.question}", "",
           f"**Conclusion.** {said}.", "",
           _verdict_line(verdict), ""]
    for f in verdict.failures:
        out.append(f"- `{f['path']}`: {clean(f['problem'])}")
    if verdict.failures:
        out.append("")
    if verdict.non_finite:
        out += ["Non-finite weights: these files reload in a fresh process, but their weights "
                "hold NaN or inf; they are kept as evidence and are **not usable**:"]
        out += [f"- `{f['path']}`: {clean(str(f['problem']))}" for f in verdict.non_finite]
        out.append("")
    out += [f"Decision metric `{c.metric}` ({c.direction}imise), judged by {bar_text(plan)} "
            f"against the control `{c.control}`: a variant's final {c.metric} must beat the "
            f"control's by at least {c.min_gain:g}."
            + (f" It must also reach the threshold {c.threshold:g}." if c.threshold is not None
               else "")
            + " Frozen plan `plan.toml` (sha256 "
            f"`{(plan_sha256 or '?')[:16]}…`), itera-tui {tool_version}." + _code_line(code),
            ""]
    if edit_note(plan.edited_keys):  # an edit after the start is named, never used
        out += [f"**Note.** {edit_note(plan.edited_keys)}.", ""]
    out += _runs_table(c.metric, runs, clean)
    out += _refused(runs, clean)
    out += _planned_vs_actual(pva, clean)
    out += _budget(plan, budget, pva.moves, clean)
    out += _figures(plan, drawing)
    out += ["Reload instructions: [RELOAD.md](RELOAD.md); stop reasons: `stops.json`; every "
            "file with its sha256: `manifest.json`.", ""]
    out += _retrieval(plan, pva, size_bytes, files, bundle_rel, store_url)
    return "\n".join(out)


def moves_section(state) -> str:
    """The boxes the campaign moved between (`itera-tui resume`): when, from which box,
    which runs were cut and how much work each lost; empty when it never moved."""
    from ..engine.lost_work import cut_runs

    if not state.moves and state.box_down is None:
        return ""
    out = ["## Box moves", ""]
    for move in state.moves:
        last = f"; its last event {utc(move.last_t)}" if move.last_t else ""
        out.append(f"- {utc(move.t)}: moved from box `{move.from_host or '?'}`{last} to box "
                   f"`{move.host or '?'}` (`itera-tui resume`); the new box, "
                   f"{move.lot_text()}, is counted in the rental")
    if state.box_down is not None:
        out.append(f"- {utc(state.box_down.t)}: box `{state.box_down.host or '?'}` announced "
                   f"its end ({state.box_down.signal}); not resumed yet")
    for cut in cut_runs(state):
        out.append(f"  - {cut.line()}")
    return "\n".join(out + ["", ""])


def summary(plan: Plan, runs: list[dict], pva: PlannedVsActual, budget: DeliverableBudget,
            said: str, verdict: Verdict, caveat: str | None = None) -> list[str]:
    """The report's opening block, short enough to paste as is into a notebook: the
    question, the verdict, the accepted deliverables and their cost, the window used
    and the rental's order references."""
    b = budget
    check = (f"bundle VERIFIED ({verdict.checked} files, {verdict.reloaded} reloaded)"
             if verdict.verified else f"bundle NOT VERIFIED ({len(verdict.failures)} "
             f"failure{'s' if len(verdict.failures) != 1 else ''})")
    accepted = [r["id"] for r in runs if r.get("accepted")]
    if b.defined:
        cost = (f"{b.per_deliverable_usd:.2f} USD (rental {b.rental_usd:.2f} USD / "
                f"{len(b.accepted)}; other expenses {b.expenses_usd:.2f} USD apart)")
    else:
        cost = (f"undefined (0 accepted); incurred {b.incurred_usd:.2f} USD (rental "
                f"{b.rental_usd:.2f} + other expenses {b.expenses_usd:.2f})")
    held = (f"the {fmt_h(pva.window_hours)} window" if len(pva.rentals) <= 1
            else f"the {fmt_h(pva.reserved_hours)} of its {len(pva.rentals)} rentals")
    used = (f"{precise_hours(pva.observed_hours)} of {held} (first "
            f"launch {utc(pva.first_launch)}, last exit {utc(pva.last_exit)}); planned "
            f"calendar {fmt_h(pva.calendar_hours)}" if pva.observed_hours is not None
            else f"nothing ran in {held}")
    orders = "; ".join(f"{lot.id} ({lot.gpu} x{lot.gpus}, {fmt_h(lot.days * 24)}): "
                       + (f"`{cell(lot.order)}`" if lot.order else "none given")
                       for lot in plan.lots)
    out = ["## Summary", "",
           f"- **Question:** {cell(plan.campaign.question)}",
           f"- **Verdict:** {cell(said)}; {check}",
           *([f"- **Caveat:** {cell(caveat)}"] if caveat else []),
           f"- **Accepted deliverables ({b.unit}):** {len(b.accepted)}"
           + (f" — {', '.join(f'`{a}`' for a in accepted)}" if accepted else ""),
           f"- **Cost per accepted {b.unit}:** {cost}",
           f"- **Window used:** {used}",
           f"- **Order references:** {orders or 'no lot'}"]
    cal = plan.calibration
    if cal is not None:
        out.append(f"- **Planned with:** {cal.used} durations (prior `{cal.prior}`, "
                   f"campaign {cell(cal.prior_campaign)})")
    return out + [""]


def _verdict_line(v: Verdict) -> str:
    if v.verified:
        return (f"Verification: **VERIFIED** ({v.checked} files match the manifest, none "
                f"empty, no machine path; {v.reloaded} checkpoints/artifacts reloaded in a "
                "fresh process). Re-check a copy with `itera-tui verify`.")
    return (f"Verification: **NOT VERIFIED** ({len(v.failures)} failure"
            f"{'s' if len(v.failures) != 1 else ''}; a file that cannot be reloaded is not a "
            "verified output):")


def _figures(plan: Plan, drawing: Drawing | None) -> list[str]:
    out = ["## Figures", ""]
    files = set(drawing.files) if drawing else set()
    if drawing is None or drawing.problem or "loss_curves.png" not in files:
        why = drawing.problem if drawing and drawing.problem else "nothing was drawn"
        return out + [f"No figures in this bundle: {why}. The curves are in each run's "
                      "`metrics.jsonl` / `stdout.log`; the bundle verifies without them.", ""]
    metric = plan.campaign.metric
    out += ["![loss per run, log scale](loss_curves.png)", "",
            "Loss per run against the global step ([SVG](loss_curves.svg)): pilots and full "
            "runs side by side, each run's train loss smoothed (EMA) over the faint raw one, "
            "its validation loss dashed where it logs one. A diverged run (a non-finite "
            "value, or over a million times the median of the others) is clipped: a ▲ at the top edge, its "
            "value in the legend; it does not set the y range.", ""]
    if "quality.png" in files:
        out += [f"![{metric} per run](quality.png)", "",
                f"`{metric}` per run ([SVG](quality.svg)) with the control's final value and "
                f"{bar_text(plan)}.", ""]
    return out + ["What each figure shows (legend, y range, scale) and every series, raw and "
                  "smoothed, to redraw it with any tool: `figures.json`.", ""]


def _code_line(code: dict | None) -> str:
    git = (code or {}).get("git") or {}
    if not code:
        return ""
    if not git.get("commit"):
        return f" Code: no git record ({git.get('reason') or 'unknown'})."
    state = "with uncommitted changes (`code/git.diff`)" if git.get("diff") else (
        "with uncommitted changes" if git.get("dirty") else "clean")
    return f" Code: git commit `{git['commit'][:12]}`, {state}."


def _refused(runs: list[dict], clean: Callable[[str], str]) -> list[str]:
    rows = [(r["id"], x) for r in runs for x in r.get("refused") or []]
    if not rows:
        return []
    out = ["### Refused: not copied into the bundle", ""]
    out += [f"- run `{rid}`: `{clean(str(x.get('path')))}`: {clean(str(x.get('reason')))}"
            for rid, x in rows]
    return out + [""]


_ENDED = {"stopped": "was stopped", "failed": "failed", "dropped": "was dropped",
          "cut": "was cut"}  # how a run that did not complete ended, said of its last figure


def _runs_table(metric: str, runs: list[dict], clean: Callable[[str], str] = str) -> list[str]:
    out = ["## Runs", "",
           f"| run | variant | kind | category | state | stop | final {metric} | duration "
           "| checkpoints |", "|---|---|---|---|---|---|---|---|---|"]
    for r in runs:
        stop = r.get("stop")
        stop_text = clean(f"{stop.get('rule')}: {stop.get('reason')}") if stop else \
            clean(r.get("retry_text") or "-")
        value = r.get("final_metric")
        final = f"{value:.4g}" if isinstance(value, (int, float)) else "-"
        if final != "-" and r.get("state") != "completed":
            # a run cut short has no final figure: its last may be from before any training
            # (a NaN stop at step 7 read "final val_loss 4.4", its step-0 evaluation)
            final += f" (last before it {_ENDED.get(r.get('state'), 'ended')})"
        dur = r.get("duration_s")
        ckpt = f"{r.get('checkpoints_acknowledged', 0)} written"
        ckpt += (f"; bundled step {r['checkpoint_step']}" if r.get("checkpoint")
                 else f"; {clean(r.get('checkpoint_note') or 'none bundled')}")
        delivered = r.get("delivered")
        if isinstance(delivered, dict) and delivered.get("text"):
            ckpt += (f"; delivered model: {clean(str(delivered['text']))}, its {metric} is "
                     "the final figure" + ("" if delivered.get("bundled")
                                           else "; NOT the bundled checkpoint"))
        out.append("| " + " | ".join(cell(x) for x in (
            f"`{r['id']}`", r["variant"], r["kind"], r["category"], r["state"], stop_text,
            final, precise_hours(None if dur is None else dur / 3600), ckpt)) + " |")
    out.append("")
    out += [clean(line) for line in adapter_report_lines(runs)]
    out += [clean(line) for line in truncation_lines(runs)]
    return out


def _planned_vs_actual(pva: PlannedVsActual, clean: Callable[[str], str] = str) -> list[str]:
    fits = "fits" if pva.calendar_fits else "does NOT fit"
    out = ["## Planned vs actual", "",
           "From the frozen plan (never rewritten) and the ledger.", "",
           f"- Hours reserved: {_reserved(pva)}; the planned calendar runs "
           f"{fmt_h(pva.calendar_hours)} end to end ({fits} the window).",
           f"- Hours observed: {precise_hours(pva.observed_hours)} from the first launch at "
           f"{_since(pva, pva.first_launch)} to the last exit at {_since(pva, pva.last_exit)}.",
           *([f"- {pva.decision_wait}; the calendar planned "
              f"{fmt_h(pva.decision_planned_hours)} for the decision."]
             if pva.decision_wait else []),
           "", "| variant / step | category | planned pilot | observed pilot | planned | "
           "observed | outcome |", "|---|---|---|---|---|---|---|"]
    for row in pva.rows:
        out.append("| " + " | ".join(cell(x) for x in (
            row.target, row.category, *_planned_observed(row.planned_pilot_h, row.observed_pilot_h),
            *_planned_observed(row.planned_h, row.observed_h), row.outcome)) + " |")
    out += ["", "### Deviations and their causes", ""]
    out += [f"- {_since(pva, t)}: {clean(text)}" for t, text in pva.deviations] or ["- none"]
    out += ["", "### Decisions", ""]
    for d in pva.decisions:
        note = f": {clean(str(d.note))}" if d.note else ""
        out.append(f"- {_since(pva, d.t)}: {d.said}{note}")
    if not pva.decisions:
        out.append("- no decision was taken (no decision point reached, or none planned)")
    return out + [""]


def _budget(plan: Plan, b: DeliverableBudget, moves=(),
            clean: Callable[[str], str] = str) -> list[str]:
    """The money: every lot rented (the plan's, then each new box's after a move, each at
    its lot price), the other expenses, and what one accepted deliverable cost."""
    lots = "; ".join([f"{lot.id}: {lot.gpu} x{lot.gpus}, {fmt_h(lot.days * 24)}, "
                      f"{lot.price_usd:.2f} USD ({lot.price_source} price)"
                      + (f", order {lot.order}" if lot.order else "") for lot in plan.lots]
                     + [f"after the move of {utc(m.t)}: {m.lot_text()}" for m in moves])
    spent = "; ".join(f"{e.name} {e.usd:.2f} USD" for e in plan.expenses)
    out = ["## Budget against the useful result", "",
           f"- Lots committed (rental): {b.rental_usd:.2f} USD" + (f" — {lots}" if lots else ""),
           f"- Other expenses, apart from the rental: {b.expenses_usd:.2f} USD"
           + (f" — {spent}" if spent else ""),
           f"- Accepted deliverables ({b.unit}): {len(b.accepted)}"
           + (f" — {', '.join(f'`{a}`' for a in b.accepted)}" if b.accepted else "")]
    if b.defined:
        out.append(f"- **Cost per accepted {b.unit}: {b.per_deliverable_usd:.2f} USD** "
                   f"(rental {b.rental_usd:.2f} USD / {len(b.accepted)} accepted; other "
                   f"expenses {b.expenses_usd:.2f} USD apart)")
    else:
        out.append(f"- **Cost per accepted {b.unit}: undefined** (0 accepted). Incurred cost: "
                   f"{b.incurred_usd:.2f} USD (rental {b.rental_usd:.2f} + other expenses "
                   f"{b.expenses_usd:.2f}); a negative result does not erase it.")
    if b.retried:  # what the hiccups cost: their GPU time is part of the rental above
        out.append(f"- Hiccups retried (`[retry]`): {clean(b.retried_text())}")
    if b.rejections:
        out += ["", "Rejected:", ""]
        out += [f"- `{r.run_id}`: {clean(r.cause)}" for r in b.rejections]
    return out + [""]


def _planned_observed(planned_h: float | None, observed_h: float | None) -> tuple[str, str]:
    """A planned and an observed duration side by side in the table, told apart as the
    deviations below tell them ("1 min 34 s" against "1 min 00 s", never "1 min"
    against "1 min" for a run the deviations say took 57 % longer)."""
    if planned_h is None or observed_h is None:
        return fmt_h(planned_h), fmt_h(observed_h)
    return told_apart(planned_h * 3600, observed_h * 3600)


def _retrieval(plan: Plan, pva: PlannedVsActual, size: int, files: int,
               bundle_rel: str, store_url: str | None = None) -> list[str]:
    mbps = plan.campaign.link_mbps
    seconds = size * 8 / (mbps * 1e6)
    planned_s = pva.retrieval_hours * 3600
    compare = ("within" if seconds <= planned_s else "OVER") + \
        f" the {fmt_h(pva.retrieval_hours)} planned for retrieval in the calendar"
    took = ("under 0.1 s" if seconds < 0.1 else f"about {seconds:.1f} s" if seconds < 120
            else f"about {fmt_h(seconds / 3600)}")
    folder = bundle_folder(plan)  # the ending's and FETCH.txt's folder, one name
    out = ["## Retrieval", "",
           f"Bundle size: {human_bytes(size)} ({size} bytes, {files} files). At "
           f"{mbps:g} Mb/s (`link_mbps`) the copy takes {took}, {compare}.", ""]
    if store_url:  # the URL as written in [store]: it holds no secret
        out += [f"The wrap-up delivers this bundle to `{store_url}` (`[store]`) and "
                "verifies it there, every file read back and hashed against "
                "`manifest.json`; the ending says whether it did. From any machine, with "
                "the store's credentials where its library looks for them (and its "
                "endpoint in `ITERA_STORE_ENDPOINT` where it needs one):", "",
                f"    itera-tui fetch {store_url} {folder}/", "",
                f"(each file checked as it arrives; `itera-tui verify {store_url}` checks "
                "it in place). While the box is up it can also be copied off it:", ""]
    else:
        out += ["Copy it off the box (from your own machine; `<campaign-dir>` is the "
                "directory holding campaign.toml on the box):", ""]
    return out + [f"    rsync -avP --partial -e ssh '<user>@<box>:<campaign-dir>/{bundle_rel}/' "
                  f"{folder}/", "",
                  f"then `itera-tui verify {folder}` there.", ""]
