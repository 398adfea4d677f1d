"""`itera-tui status`: the campaign replayed from the ledger, read-only.

Its plan is the frozen one once the campaign has started (an edited
campaign.toml is named, never used: campaign.frozen). It takes no lock and starts nothing, so it is safe while the control room or
a headless run drives the campaign. A damaged ledger is shown, line by line
(which seq, what was lost), never a traceback: it is the first place a user
looks when the engine refuses to open a campaign.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..campaign.frozen import edit_note, load_started_plan
from ..campaign.loading.sections import rule_label
from ..campaign.units import human_duration, lot_text
from ..engine.ledger.events import EngineRestarted, decided_by_words
from ..engine.ledger.file import read_ledger_report
from ..engine.ledger.damage import open_refusal
from ..engine.conclusion.outcome import STILL_RUNNING, budget, conclude
from ..engine.scheduler import phase_of
from ..engine.ledger.state import replay
from ..engine.conclusion.verdict import verdict_of
from ..engine.lost_work import cut_runs
from ..engine.moves import how_to_continue


def _share(plan):
    from ..campaign.boxes import recorded_lot, share_of_lot

    try:
        return share_of_lot(plan, recorded_lot(plan.state_dir))
    except KeyError:  # a lot file naming no lot of this plan: show everything
        return share_of_lot(plan, None)


def _with_far_boxes(plan, events, state):
    """The first box of a running fleet: every other box's runs from its own ledger, read
    there over ssh (tui.remote.ledgers), joined to this box's; and how each box was read."""
    from ..campaign.boxes import box_shares, is_multi_box

    if not is_multi_box(plan) or not _share(plan).runs_steps:
        return state, []
    from concurrent.futures import ThreadPoolExecutor

    from ..bundle.parts import run_events
    from ..remote.ledgers import read_far_ledger

    remote = [share for share in box_shares(plan) if share.remote]
    with ThreadPoolExecutor(max_workers=min(8, len(remote))) as pool:
        read = list(pool.map(read_far_ledger, remote))
    joined = list(events)
    for far in read:
        joined += run_events(list(far.events))
    return replay(joined), [far.to_dict() for far in read]


def status_dict(path: Path, now: float | None = None, far: bool = True) -> dict:
    """`far`: on the first box of a campaign over several boxes, read the others'
    ledgers over ssh (until the wrap-up has pulled them here)."""
    plan = load_started_plan(path, check_files=False)  # after the start: the frozen plan
    now = time.time() if now is None else now
    runs_dir = plan.state_dir / "runs"
    ledger = read_ledger_report(plan.state_dir / "ledger.jsonl", runs_dir)
    refusal = open_refusal(plan.state_dir, ledger, strict_run_dirs=True) \
        if plan.state_dir.is_dir() else None  # the engine's own words, empty ledger included
    state = replay(ledger.events)
    from ..session.ending import fleet_view

    boxes: list[dict] = []
    merged = fleet_view(plan, state)  # the first box, once it merged every box's part
    if merged is not None:
        state, runs_dir = merged
    elif far:
        state, boxes = _with_far_boxes(plan, ledger.events, state)
    box_of_lot = {lot.id: lot.box for lot in plan.lots}
    runs = [r.to_dict() | {"category": r.category,
                           "box": box_of_lot.get(getattr(r, "lot", None), "this box")}
            for r in state.runs]
    ran = {r.target for r in state.runs if r.kind == "run"}
    share = _share(plan)  # another box of a campaign over several: its share only
    phase = phase_of(plan, state, share) if state.started_t else "not started"
    never = None  # why full runs not started yet never will be
    if state.decided and state.decided.decision == "wrapup":
        never = "the decision was to wrap up"
    elif phase == "blocked":
        never = "a check before the pilot failed"
    for v in plan.variants:  # full runs not started yet are still part of the picture
        if v.id not in ran and v.id in share.variants:
            dropped = v.id in state.dropped or never is not None
            runs.append({"id": None, "variant": v.id, "kind": "run", "category": v.category,
                         "state": "dropped" if dropped else "queued",
                         "note": never if v.id not in state.dropped else "dropped",
                         "stop": None, "exit_code": None})
    conclusion = conclude(plan, state, runs_dir)
    window = {"start": state.window_start, "end": state.window_end,
              "seconds_left": None if state.window_end is None
              else round(state.window_end - now, 1)}
    return {"campaign": plan.campaign.name, "phase": phase, "runs": runs,
            "plan_edited": list(plan.edited_keys), "plan_note": edit_note(plan.edited_keys),
            "decisions": [d.to_dict() for d in state.decisions],
            "engine_restarts": [{"t": e.t, "reason": e.reason, "restarts": e.restarts}
                                for e in ledger.events if isinstance(e, EngineRestarted)],
            "decision_pending": vars(state.decision_pending) if state.decision_pending else None,
            "dropped": sorted(state.dropped), "paused": state.paused, "window": window,
            "budget": budget(plan, state, runs_dir).to_dict(),
            "conclusion": conclusion.to_dict(),
            "verdict": verdict_of(plan, state, conclusion).to_dict(),
            "wrapup": state.wrapup.to_dict() | {"text": state.wrapup.line()}
            if state.wrapup else None,
            "moves": [m.to_dict() for m in state.moves],
            "box_down": state.box_down.to_dict() | {"continue": how_to_continue(plan)}
            if state.box_down else None,
            "cut": [c.to_dict() for c in cut_runs(state)],
            "warnings": [vars(w) for w in state.warnings[-10:]],
            "boxes": boxes,
            "store": _stored(plan),
            "ledger": ledger.to_dict() | {"fatal": refusal}}




def _clock(t) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if isinstance(
        t, (int, float)) else "?"


def _stored(plan) -> dict | None:
    """[store]: what the mirror last said is off the box (.itera/store.json)."""
    if plan.store is None:
        return None
    from ..store.status import read_status

    st = read_status(plan.state_dir)
    if st is None:
        return {"url": plan.store.url, "text": "off-box: nothing stored yet (the engine "
                "has not mirrored this campaign)"}
    return st.to_dict() | {"text": st.text(time.time())}


def ledger_lines(ledger: dict) -> list[str]:
    """The ledger's health for the text status: nothing when it is whole."""
    out = [f"  ledger damage: {d['text']}" for d in ledger["damage"]]
    out += [f"  ledger: run directory {name} is not in the ledger"
            for name in ledger["unknown_run_dirs"]]
    if ledger["torn_tail_bytes"]:
        out.append(f"  ledger: a torn last line ({ledger['torn_tail_bytes']} bytes, being "
                   "written now or cut when the engine next opens the campaign)")
    if ledger["fatal"]:
        out.append(f"  ledger: the engine will refuse to go on: {ledger['fatal']}")
    return out


def _per_accepted(b: dict) -> str:
    """The cost per accepted deliverable as far as it is known: "undefined" alone read
    as a result while runs still went on and none was judged yet."""
    if b["per_deliverable_usd"] is not None:
        return f"{b['per_deliverable_usd']:.2f} USD"
    waiting = sum(r["cause"] == STILL_RUNNING for r in b["rejections"])
    if waiting:
        return (f"none accepted yet ({waiting} run{'s' if waiting != 1 else ''} not judged "
                "yet: known when they end)")
    return "undefined (0 accepted)"


def print_status(path: Path, as_json: bool = False) -> int:
    data = status_dict(path)
    if as_json:
        print(json.dumps(data, indent=2, default=str))
        return 0
    left = data["window"]["seconds_left"]
    print(f"{data['campaign']}: phase {data['phase']}, window "
          + ("not started" if left is None else f"ends in {human_duration(left)}" if left > 0
             else f"ended {human_duration(-left)} ago"))
    if data["plan_note"]:
        print(f"  note: {data['plan_note']}")
    for r in data["runs"]:
        stop = (f"  {rule_label(r['stop']['rule'])}: {r['stop']['reason']}" if r.get("stop")
                else "")
        print(f"  {r['id'] or '-':<28} {r['variant']:<14} {r['kind']:<6} {r['state']:<10}{stop}"
              + (f"  {r['retry_text']}" if r.get("retry_text") else ""))
    for m in data["moves"]:  # the campaign continued on another box (`itera-tui resume`)
        print(f"  moved: {_clock(m['t'])} from box "
              f"{m['from_host'] or '?'} to {m['host'] or '?'} ("
              f"{lot_text(m['lot'], m['window_hours'], m['price_usd'])})")
    if data["box_down"]:
        print(f"  the box announced its end ({data['box_down']['signal']}): continue with "
              f"{data['box_down']['continue']}")
    for c in data["cut"]:  # tui.engine.lost_work: the one wording of the work redone
        print(f"  cut: {c['text']}")
    for d in data["decisions"]:  # who took it: a person (room or CLI), the deadline, the plan
        drop = f" {','.join(d['drop'])}" if d.get("drop") else ""
        by = f"by {decided_by_words(d.get('by'))}"
        print(f"  decision: {d['decision']}{drop} ({by}) at {_clock(d.get('t'))}")
    for r in data["engine_restarts"]:  # a night away: the engine died and came back
        print(f"  engine restarted at {_clock(r['t'])} after it died ({r['reason']}; restart "
              f"{r['restarts']}): runs reattached from the ledger")
    v = data["verdict"]
    word = {"yes": "answered yes", "no": "answered no"}.get(v["verdict"], v["verdict"])
    print(f"  verdict: {word}: {v['reason']}")
    b = data["budget"]
    print(f"  budget: incurred {b['incurred_usd']:.2f} USD; per accepted {b['unit']}: "
          + _per_accepted(b))
    if b.get("retried_text"):  # the attempts hiccups cost (`[retry]`), against the result
        print(f"  budget: {b['retried_text']}")
    for r in b["rejections"]:  # the words of tui.engine.conclusion.outcome.acceptance
        if r["cause"] == STILL_RUNNING:  # not judged yet: nothing was refused
            print(f"  not judged yet: {r['run_id']}: {STILL_RUNNING} (judged when it ends)")
        else:
            print(f"  not accepted: {r['run_id']}: {r['cause']}")
    for box in data["boxes"]:
        if box["missing"]:
            print(f"  {box['box']}: its runs are not shown: {box['missing']}")
    if data["wrapup"]:  # the bundle on this box, as the ending names it
        print(f"  {data['wrapup']['text']}")
    if data["store"]:
        print(f"  {data['store']['text']}")
        bundle = data["store"].get("bundle")
        if bundle:
            print(f"  bundle at the store: {bundle['url']} ("
                  + ("verified there" if bundle["verified"] else "NOT verified there") + ")")
    for line in ledger_lines(data["ledger"]):
        print(line)
    return 0
