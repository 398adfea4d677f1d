"""One readable line per ledger event, for the headless log and the events panel.

A line carries text a run controls (a stop reason, a checkpoint's error, a note),
so every line leaves `describe` cleaned for a terminal (`for_terminal`)."""

from __future__ import annotations

import time

from ...campaign.text import for_terminal
from ...campaign.units import human_duration, human_hours


def clock_text(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


def describe(ev: dict) -> str | None:
    """A human line for an event, or None for bookkeeping not worth showing; cleaned
    for a terminal (controls and escape sequences made visible)."""
    line = _describe(ev)
    return None if line is None else for_terminal(line)


def _describe(ev: dict) -> str | None:
    kind = ev.get("event")
    run = ev.get("run", "")
    if kind == "run_launched":
        where = f"lanes {','.join(ev.get('lanes') or []) or '-'}, CUDA_VISIBLE_DEVICES=" \
                f"{ev.get('devices') or '(none)'}"
        steps = f", max {ev['max_steps']} steps" if ev.get("max_steps") else ""
        if ev.get("resumes"):
            steps += (f"; continues {ev['resumes']} from {ev['resume_from']}"
                      if ev.get("resume_from") else
                      f"; relaunches {ev['resumes']}: {ev.get('resume_reason')}")
        return f"launched {run} ({ev.get('kind')}, {ev.get('category')}, {where}{steps})"
    if kind == "run_skipped":
        return f"skipped {ev.get('target')} ({ev.get('kind')}): {ev.get('reason')}"
    if kind == "run_exited":
        note = f"; {ev['note']}" if ev.get("note") else ""
        by = ev.get("stopped_by")
        if by == "wrapup":  # it ended because the wrap-up asked, not on its own
            return f"stopped {run} for the wrap-up (exit status {ev.get('exit_code')}{note})"
        if by:
            return f"stopped {run} (asked by {by}; exit status {ev.get('exit_code')}{note})"
        note = f" ({ev['note']})" if ev.get("note") else ""
        return f"exited {run} with status {ev.get('exit_code')}{note}"
    if kind == "stop_rule_fired":
        return f"STOP {run}: {ev.get('rule')} — {ev.get('reason')}"
    if kind == "run_stop_requested":
        if ev.get("signal") == "none":
            return f"stop requested of {run} ({ev.get('by')}: {ev.get('reason')})"
        return f"SIGTERM to {run} ({ev.get('by')}: {ev.get('reason')})"
    if kind == "run_terminated":
        return f"SIGTERM to {run} (the stop request was not honoured in time)"
    if kind == "run_killed":
        return f"SIGKILL to {run} after {ev.get('after_s')} s grace"
    if kind == "run_reattached":
        return f"reattached to {run} (pid {ev.get('pid')})"
    if kind == "checkpoint_requested":
        return f"checkpoint requested for {run} ({ev.get('by')})"
    if kind == "checkpoint_acknowledged":
        size = (ev.get("bytes") or 0) / 1e6
        step = f"at step {ev['step']}" if ev.get("step") is not None else "(no step recorded yet)"
        return (f"checkpoint written by {run} {step}: {size:.1f} MB in "
                f"{ev.get('write_s') or 0:.2f} s")
    if kind == "checkpoint_verified":
        verdict = "verified" if ev.get("ok") else f"FAILED verification: {ev.get('problem')}"
        return f"checkpoint of {run} {verdict} ({ev.get('path')})"
    if kind == "checkpoint_rotated":
        when = {True: "after it was verified", False: "after it FAILED verification",
                None: "before it could be read (not a verification failure)"}[ev.get("verified")]
        step = f" at step {ev['step']}" if ev.get("step") is not None else ""
        return (f"checkpoint of {run}{step} rotated away by the trainer {when} "
                f"({ev.get('path')})")
    if kind == "resume_check_result":
        return (f"resume check {'passed' if ev.get('ok') else 'FAILED'} for {run} "
                f"({ev.get('steps_compared')} steps compared, max diff {ev.get('max_abs_diff')})")
    if kind == "decision_pending":
        line = "decision point: the pilot is done, the queue waits for a decision"
        if ev.get("deadline") is not None:
            line += (f"; with no answer by {clock_text(ev['deadline'])} the engine takes "
                     f"the default ({ev.get('default')})")
        return line
    if kind == "decision_taken":
        drop = f" {','.join(ev.get('drop') or [])}" if ev.get("drop") else ""
        return f"decision: {ev.get('decision')}{drop} (by {ev.get('by')})"
    if kind == "variant_dropped":
        return f"dropped variant {ev.get('variant')} ({ev.get('reason')})"
    if kind in ("queue_paused", "queue_resumed"):
        return "queue paused" if kind == "queue_paused" else "queue resumed"
    if kind == "window_started":
        stamp = "%Y-%m-%d %H:%M"  # a 3-day window needs the date, not only the time
        return (f"rental window: {time.strftime(stamp, time.localtime(ev['start']))} to "
                f"{time.strftime(stamp, time.localtime(ev['end']))} "
                f"({human_hours(ev.get('hours'))})")
    if kind in ("run_leftovers", "run_leftovers_killed"):
        named = ", ".join(f"{p.get('name')} (pid {p.get('pid')}, {p.get('how')})"
                          for p in ev.get("processes") or [] if isinstance(p, dict))
        if kind == "run_leftovers":
            return (f"{run} left processes behind: {named}; SIGTERM now, SIGKILL after "
                    f"{ev.get('grace_s')} s")
        return f"SIGKILL to what {run} left behind: {named}"
    if kind == "clock_stepped":
        by = ev.get("by_s") or 0
        return (f"the wall clock stepped {'forward' if by > 0 else 'back'} by "
                f"{human_duration(abs(by))} (runs are timed on the monotonic clock: none is "
                f"stopped for it)")
    if kind == "warning":
        return f"warning: {ev.get('message')}"
    if kind == "engine_restarted":
        return (f"engine restarted after it died ({ev.get('reason')}; restart "
                f"{ev.get('restarts')}): runs reattached from the ledger")
    if kind == "box_going_down":
        runs = ", ".join(ev.get("runs") or []) or "no live run"
        why = ev.get("notice") or f"{ev.get('signal')} from the system"
        return (f"BOX GOING DOWN ({why}): checkpoint asked of {runs}; the engine waits "
                f"{ev.get('grace_s'):g} s for them, then goes")
    if kind == "box_checkpointed":
        saved = ", ".join(f"{r} ({p})" for r, p in (ev.get("saved") or {}).items()) or "none"
        unsaved = ", ".join(ev.get("unsaved") or [])
        return (f"box going down: verified checkpoints kept for {saved}"
                + (f"; none for {unsaved} (they start over on the next box)" if unsaved else ""))
    if kind == "campaign_moved":
        cut = ", ".join(ev.get("cut") or []) or "none"
        return (f"campaign moved to {ev.get('host') or 'this box'} from "
                f"{ev.get('from_host') or 'the old box'} (resumed from {ev.get('store')}); "
                f"runs cut: {cut}; new rental {human_hours(ev.get('window_hours'))} at "
                f"{ev.get('price_usd'):.2f} USD")
    if kind == "wrapup_started":
        return "wrap-up started"
    if kind == "wrapup_done":
        state = "verified" if ev.get("verified") else f"NOT verified ({ev.get('failures')} failures)"
        return f"bundle {state}: {ev.get('bundle')}"
    if kind == "campaign_started":
        return "campaign started (plan frozen in .itera/plan.toml)"
    if kind == "store_object":
        return (f"stored off the box: {ev.get('key')} ({ev.get('kind')}, {ev.get('bytes')} "
                f"bytes, sha256 {str(ev.get('sha256'))[:12]}…)")
    if kind == "store_down":
        return (f"warning: the store {ev.get('url')} does not answer ({ev.get('message')}); "
                "the runs go on, the mirror retries and catches up")
    if kind == "store_at_risk":
        return f"warning: the bundle's delivery is at risk: {ev.get('message')}"
    if kind == "store_up":
        down = ev.get("down_s")
        return (f"the store {ev.get('url')} answers again"
                + (f" after {human_duration(down)}" if isinstance(down, (int, float)) else "")
                + ": the mirror catches up")
    if kind == "store_delivered":
        if ev.get("verified"):
            return (f"bundle delivered to {ev.get('url')} and verified there "
                    f"({ev.get('files')} files, {ev.get('bytes')} bytes)")
        failed = "; ".join((ev.get("problems") or [])[:3])
        return f"bundle delivered to {ev.get('url')} but NOT verified there: {failed}"
    return None
