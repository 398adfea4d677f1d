"""`itera-tui resume URL [DIR]`: a campaign whose box went away continues on this one.

The store (tui.store) holds what rebuilds the campaign anywhere: the frozen plan,
the ledger and every checkpoint once it verified. `resume` fetches them into a
staging folder beside DIR, checks every object (each copy by the size and sha256
the store's index recorded, the ledger line by line with its CRCs and against the
index's length and sha256, each checkpoint again against the digest its run
acknowledged in the ledger), and refuses, naming the object, when anything is
damaged or missing: the campaign never starts on a damaged history. Only then
does the staged `.itera/` take its place in DIR, with the new box's rental (the
one plan change, `engine/moves.py`), and the engine starts there exactly as
`itera-tui engine start` starts it. Replay and adoption are the engine's own:
completed runs stay completed, each cut run continues from its last verified
checkpoint that reached the store, or starts over under a new attempt. A run the
store cannot prove finished whole (its exit's results not all in the index) is
cut too and run again, never judged on half; a wrap-up whose bundle never reached
the store is done again on the new box. Only a bundle delivered and verified at
the store ends it: that resume is refused, pointing at `itera-tui fetch`.
"""

from __future__ import annotations

import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ..campaign.loading.sections import shown_url

EXIT_REFUSED = 2  # damaged or missing in the store, or bad input: nothing started


class ResumeRefused(Exception):
    """Why the campaign is not resumed; each line names one object or one input."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Rental:
    """The new box's rental, a lot as the plan gives one: its window and the lot's price
    for the whole window (a second expense; never an hourly rate)."""
    window_hours: float
    price_usd: float
    lot: str | None = None  # the `[[lot]]`'s gpu name

    @classmethod
    def of(cls, lot_text: str | None) -> "Rental":
        """`--lot`, read and checked by the plan's own lot reader."""
        from ..campaign.loading.lots import read_inline_lot

        if lot_text is None:
            raise ResumeRefused(["the new box's lot is needed (the budget counts it): "
                                 "--lot 'gpu = \"RTX 4090\", days = 3, price_usd = 47.14'"])
        problems: list[str] = []
        lot = read_inline_lot(lot_text, "--lot", problems)
        if lot is None:
            raise ResumeRefused(problems)
        return cls(float(lot.hours), float(lot.price_usd), lot.gpu)


@dataclass(frozen=True)
class Resumed:
    """What `resume` laid down and what the engine will do with it."""
    dest: Path
    part: str
    completed: tuple[str, ...]  # runs the old box finished: never run again
    # run still to continue -> the verified checkpoint it continues from (None: starts
    # over), relative to the run directory of its owner (`owners`, else the run's own)
    cut: dict
    files: int
    rerun: dict | None = None  # run -> why: completed there, not proven whole: run again
    undelivered: str | None = None  # wrapped up there, its bundle not at the store: why
    owners: dict | None = None  # run -> the earlier attempt whose newer checkpoint it takes
    continued: dict | None = None  # run cut on an earlier box -> the run that continued it

    def line(self) -> str:
        """What `resume` says it will continue: only the runs that still need it; the
        ones an earlier box already continued are named with who continued them."""
        owners, continued = self.owners or {}, self.continued or {}
        cut = ", ".join(
            f"{r} (starts over)" if p is None else f"{r} (from {owners[r]}'s {p})"
            if r in owners else f"{r} (from {p})" for r, p in self.cut.items()) or "none"
        line = (f"{len(self.completed)} completed run(s) kept, cut: {cut}")
        if continued:
            line += "; already continued on an earlier box: " + ", ".join(
                f"{r} (by {by})" for r, by in continued.items())
        return line


def continuation_plan(state, held: dict) -> tuple[dict, dict, dict]:
    """(run to continue -> checkpoint, run -> owner of that checkpoint when an earlier
    attempt's, run already continued -> by whom), from the replayed store's ledger and
    `held` (run -> its verified checkpoint fetched and checked here). A run an earlier box
    cut and already continued is not continued again; the one that continued it is, from
    the newest verified checkpoint of any attempt of its task (tui.engine.scheduler)."""
    from ..engine.scheduler import newest_checkpoint

    def fetched(run):
        path = held.get(run.id)
        return next((v for v in reversed(run.verified) if v.ok and v.path == path), None) \
            if path else None

    followers = {r.resumes: r.id for r in state.runs if r.resumes}
    cut, owners, continued = {}, {}, {}
    for run in state.runs:
        if run.state not in ("running", "cut"):
            continue
        if run.id in followers:
            continued[run.id] = followers[run.id]
            continue
        found = newest_checkpoint(state, run, fetched)
        cut[run.id] = found[1].path if found is not None else None
        if found is not None and found[0] is not run:
            owners[run.id] = found[0].id
    return cut, owners, continued


ALIVE_WITHIN_S = 120.0  # an engine that wrote this recently may still drive the campaign


def old_box_may_live(events: list[dict], now: float) -> str | None:
    """Why the old box may still be driving the campaign (its engine never said it
    stopped and wrote a moment ago), or None. Only for a store written before leases
    (`tui.store.lease`, which decides otherwise). Two engines on two boxes would run, and
    pay for, every run twice and write the same store; `--force` says the old box is gone."""
    from ..engine.ledger.events import BoxCheckpointed, EngineStarted, EngineStopped

    starts = [i for i, ev in enumerate(events) if isinstance(ev, EngineStarted)]
    if not starts:
        return None
    if any(isinstance(ev, (EngineStopped, BoxCheckpointed)) for ev in events[starts[-1]:]):
        return None
    last_t = max(float(ev.t) for ev in events)
    age = now - last_t
    if age >= ALIVE_WITHIN_S:
        return None
    host = next((ev.host for ev in reversed(events)
                 if isinstance(ev, EngineStarted) and ev.host), None)
    return (f"the engine on box {host or '?'} wrote to the store {max(0.0, age):.0f} s ago "
            "and never said it stopped: it may still be driving this campaign. Stop it "
            "there (`itera-tui engine stop`), or, if that box is gone, pass --force")


def _pick_part(store, part: str | None) -> str:
    from ..store import list_parts

    parts = list_parts(store)
    if part is not None:
        if part not in parts:
            raise ResumeRefused([f"{store.url.url_of(part)}: no campaign stored there "
                                 f"(parts: {', '.join(parts) or 'none'})"])
        return part
    if not parts:
        if not store.fs.exists(store.path()):
            raise FileNotFoundError(f"{store.url.root}: no such bucket, prefix or folder")
        raise ResumeRefused([f"{store.label}: no campaign stored there (no index.json "
                             "in it or in a folder under it)"])
    if len(parts) > 1:
        raise ResumeRefused([f"{store.label} holds the parts of several boxes "
                             f"({', '.join(parts)}): name one with --part"])
    return parts[0]


def _check_ledger(state_dir: Path) -> list[dict]:
    """The fetched ledger, line by line: any damage refuses (the history is the record)."""
    from ..engine.ledger.damage import open_refusal
    from ..engine.ledger.file import read_ledger_report

    report = read_ledger_report(state_dir / "ledger.jsonl", state_dir / "runs")
    problems = [f"ledger.jsonl in the store, line {d.line} (seq {d.seq}): {d.problem}"
                for d in report.damage]
    if report.torn_tail_bytes:
        problems.append(f"ledger.jsonl in the store ends in a torn line "
                        f"({report.torn_tail_bytes} bytes): it was cut")
    refusal = open_refusal(state_dir, report, strict_run_dirs=True)
    if refusal:
        problems.append(refusal)
    if report.empty:
        problems.append("ledger.jsonl in the store holds no event")
    if problems:
        raise ResumeRefused(problems)
    return list(report.events)


def _check_checkpoints(state_dir: Path, state, fetched: set[str]) -> dict:
    """Each cut run's last verified checkpoint that reached the store (of every attempt:
    an earlier one's may be the newest), checked against the digest its run
    acknowledged; a stored one that does not match refuses."""
    from ..campaign.files import sha256_tree
    from ..training.digest import DigestUnavailable, sidecar_digest, verify_hash

    problems, cut = [], {}
    for run in state.runs:
        if run.state not in ("running", "cut"):
            continue
        acks = {c.path: c for c in run.checkpoints}
        cut[run.id] = None
        for verdict in reversed(run.verified):
            # a watched checkpoint is stored as the engine's copy the verifier read (its
            # `held` path): that copy is what was laid back, not the script's own file
            stored = [f".itera/runs/{run.id}/{where}" for where in (verdict.held, verdict.path)
                      if where]
            rel = next((r for r in stored if r in fetched), None)
            if not verdict.ok or rel is None:
                continue
            ack = acks.get(verdict.path)
            sidecar = {"digest": ack.digest, "sha256": ack.sha256} if ack else {}
            sidecar = {k: v for k, v in sidecar.items() if v}
            path = state_dir.parent / rel
            try:
                if path.is_dir():  # an HF checkpoint-N/: acknowledged by its tree sha256
                    recorded = sidecar_digest(sidecar) if sidecar else None
                    ok = recorded is None or recorded == f"sha256:{sha256_tree(path)[0]}"
                else:
                    ok = path.is_file() and (not sidecar or verify_hash(path, sidecar))
            except DigestUnavailable as exc:
                problems.append(f"checkpoint {run.id}/{verdict.path}: {exc}")
                break
            if not ok:
                problems.append(f"checkpoint {run.id}/{verdict.path} in the store differs "
                                "from the one its run acknowledged (digest mismatch)")
                break
            cut[run.id] = verdict.path
            break
    if problems:
        raise ResumeRefused(problems)
    return cut


def _unproven(state, index, part: str, plan_path: Path) -> dict[str, str]:
    """Runs the old box finished that the store cannot prove finished whole, each with
    what its index lacks: the latest completed run of each variant still in play (its
    pilot while the decision waits for it) whose exit's results are not all listed:
    the seal the mirror stores last (exit.json, so every result before it went), and
    for a full run each of the plan's `[deliverables]`. Its results were in the bucket
    but not yet in the index, or never sent: kept, it would be judged on half (a
    missing deliverable changes the verdict); it is run again instead."""
    from ..campaign import PlanError
    from ..campaign.loading.load import load_plan
    from ..store.layout import Layout, inside_run
    from ..store.mirror import RUN_SEAL

    if index is None:
        return {}
    try:
        plan = load_plan(plan_path, check_files=False)
    except PlanError as exc:  # the frozen plan is the record: it must read
        raise ResumeRefused([f"plan.toml in the store: {p}" for p in exc.problems]) from None
    layout = Layout(part)
    out: dict[str, str] = {}
    for variant in plan.variants:
        if variant.id in state.dropped:
            continue
        for kind in ("pilot", "run"):
            runs = state.runs_of(variant.id, kind)
            if not runs or runs[-1].state != "completed" or \
                    (kind == "pilot" and state.decided is not None):
                continue
            run = runs[-1]
            names = [RUN_SEAL] + (list(plan.deliverables.files) if kind == "run" else [])
            lacking = [name for name in names if (rel := inside_run(run.id, name)) is None
                       or index.stored(layout.result(run.id, rel)) is None]
            if lacking:
                out[run.id] = f"not in the store's index: {', '.join(lacking)}"
    return out


def fetch_campaign(url: str, dest: Path, options: dict, rental: Rental,
                   part: str | None = None, force: bool = False) -> Resumed:
    """Fetch, check, and lay the campaign into `dest` with its move request; nothing is
    left in `dest` when a check refuses."""
    from ..engine.ledger.state import replay
    from ..engine.moves import MoveRequest
    from ..store import ObjectKind, StoreError, fetch_part, open_store
    from ..store.lease import LeaseRefused, keep_here, take_over
    from ..store.fetch import part_named_by
    from ..store.url import STORE_FAILURES, store_failure

    dest = Path(dest).absolute()
    if (dest / ".itera" / "ledger.jsonl").exists():
        raise ResumeRefused([f"{dest} already holds a campaign (.itera/ledger.jsonl): "
                             "resume into a fresh folder"])
    dest.mkdir(parents=True, exist_ok=True)
    staging = dest / ".itera-resume"
    shutil.rmtree(staging, ignore_errors=True)
    lease = None
    try:
        store = open_store(url, options)
        named = part_named_by(store)  # the URL of one part: its store and that part
        if named is not None and part in (None, named[1]):
            store, part = named
        chosen = _pick_part(store, part)
        try:  # one box drives the campaign: taken before anything is read (store/lease.py)
            lease, leased_before = take_over(store, chosen, force)
        except LeaseRefused as exc:
            raise ResumeRefused([str(exc)]) from None
        try:
            fetched = fetch_part(store, chosen, staging, kinds=(
                ObjectKind.PLAN, ObjectKind.CHECKPOINT, ObjectKind.LOG, ObjectKind.RESULT))
        except StoreError as exc:
            raise ResumeRefused([str(exc)]) from None
        if fetched.problems:
            raise ResumeRefused([f"damaged or missing in the store: {p}"
                                 for p in fetched.problems])
        state_dir = staging / ".itera"
        if not (state_dir / "plan.toml").is_file():
            raise ResumeRefused([f"{store.url.url_of(chosen, 'plan.toml')}: the frozen plan "
                                 "is not in the store"])
        events = _check_ledger(state_dir)
        alive = None if force or leased_before else old_box_may_live(events, time.time())
        if alive is not None:
            raise ResumeRefused([alive])
        state = replay(events)
        undelivered = None
        if state.wrapup is not None and state.wrapup.state == "done":
            undelivered = _undelivered(store, chosen, fetched.index)
        rerun = _unproven(state, fetched.index, chosen, state_dir / "plan.toml")
        held = _check_checkpoints(state_dir, state, set(fetched.files))
        cut, owners, continued = continuation_plan(state, held)
        cut.update(dict.fromkeys(rerun))  # from the start: a completed run's last save
        held.update(dict.fromkeys(rerun))
        MoveRequest(store.label, rental.window_hours, rental.price_usd, rental.lot,
                    tuple((r, p) for r, p in held.items() if p), tuple(rerun.items()),
                    undelivered).write(state_dir)
        keep_here(lease, state_dir)
        state_dir.rename(dest / ".itera")
        if not (dest / "campaign.toml").exists():  # the code is the person's; the plan is kept
            shutil.copyfile(dest / ".itera" / "plan.toml", dest / "campaign.toml")
        completed = tuple(r.id for r in state.runs if r.state == "completed"
                          and r.id not in rerun)
        lease = None  # the engine takes it up from .itera/lease.json
        return Resumed(dest, chosen, completed, cut, len(fetched.files), rerun, undelivered,
                       owners, continued)
    except STORE_FAILURES as exc:  # unreachable, refused, no such bucket, no credentials
        raise ResumeRefused([store_failure(url, exc, options)]) from None
    finally:
        if lease is not None:  # refused after taking it: as if never taken
            lease.withdraw()
        shutil.rmtree(staging, ignore_errors=True)


def _undelivered(store, part: str, index) -> str:
    """Why the bundle of a campaign wrapped up on the old box does not stand at the
    store (it was built there, and lost with the box when its delivery did not end); a
    bundle delivered and verified there refuses the resume: there is nothing to do but
    fetch it."""
    from ..store.deliver import delivered_at
    from ..store.layout import Layout

    key = Layout(part).bundle
    check = delivered_at(store, key, index.bundle if index is not None else None)
    if check.verified:
        raise ResumeRefused([f"the campaign in the store is already wrapped up and its "
                             f"bundle delivered and verified there: `itera-tui fetch "
                             f"{shown_url(check.url)} DIR`"])
    from ..campaign.text import for_terminal  # a name from the stored manifest: hostile

    return for_terminal(check.failures[0])[:300] if check.failures else "not delivered"


def resume_command(url: str, dest: Path, options: dict, lot_text: str | None,
                   part: str | None = None, force: bool = False) -> tuple[int, Path | None]:
    """The command: refuse in words (exit 2, nothing started) or start the engine as
    `engine start` does; returns (status, the campaign file to open a room on)."""
    from ..campaign import PlanError
    from ..store import StoreError
    from .client import EngineUnavailable
    from .commands import EXIT_NO_ENGINE

    try:
        rental = Rental.of(lot_text)
        resumed = fetch_campaign(url, dest, options, rental, part, force)
    except (ResumeRefused, StoreError) as exc:
        for line in getattr(exc, "problems", [str(exc)]):
            print(f"itera-tui: resume: {line}", file=sys.stderr)
        print("itera-tui: resume: nothing was started", file=sys.stderr)
        return EXIT_REFUSED, None
    path = resumed.dest / "campaign.toml"
    from ..session import load_campaign

    try:
        plan = load_campaign(path)  # the code and the corpus must be here: named if not
    except PlanError as exc:
        for line in exc.problems:
            print(f"itera-tui: resume: {line}", file=sys.stderr)
        print(f"itera-tui: resume: the campaign is fetched into {resumed.dest}; put its "
              "code and corpus there, then `itera-tui engine start`", file=sys.stderr)
        return EXIT_REFUSED, None
    print(f"fetched {resumed.files} objects of {resumed.part} from {shown_url(url)}, every "
          f"one checked; {resumed.line()}")
    for rid, why in (resumed.rerun or {}).items():
        print(f"{rid} completed on the old box, but the store cannot prove it finished "
              f"whole ({why}): it runs again here from the start, never kept half")
    if resumed.undelivered:
        print("the campaign was wrapped up on the old box, but its bundle is not at the "
              f"store ({resumed.undelivered}): the engine builds it again here from what "
              "the store holds and delivers it, then verifies it there")
    from .starter import connect

    try:
        client = connect(plan, start=True, name="cli", snapshots=False, history=0)
    except EngineUnavailable as exc:
        print(f"itera-tui: {exc}", file=sys.stderr)
        return EXIT_NO_ENGINE, None
    pid = client.engine_pid
    client.close()
    print(f"the engine (pid {pid}) drives {plan.campaign.name} on this box; `itera-tui` "
          "opens the room")
    return 0, path
