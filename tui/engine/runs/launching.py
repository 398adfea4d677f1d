"""Launching runs: free GPU lanes, the run protocol's environment, the run id.

Placement follows the calendar's rule: a run that needs N GPUs gets N free
lanes of one lot (lots never merge memory), and a lot whose own window has
ended takes nothing new. Each run gets its own directory (never reused: a
taken directory moves the attempt on), its resolved configuration
(`params.json`) and the ITERA_* environment of ARCHITECTURE.md. The intent to
launch is in the ledger before the process starts, so a crash in between
leaves a run the next engine finds (by its run id, run directory and campaign
folder: `belonging`) instead of one it would launch a second time beside the
first, and never another campaign's run of the same id.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from ...campaign.held import held_path
from ...campaign.plan import Plan
from ..ledger.journal import Journal
from .belonging import RunIdentity
from .port import HostProcesses, Processes
from .ids import config_hash, run_id
from ..scheduler import Intent, next_intents
from ..checkpoints.verifier_process import fresh_env
from ..ledger.events import (Event, RunLaunchAbandoned, RunLaunched, RunLaunchFailed,
                             RunLaunchIntent, RunSkipped, WarningEvent)

PLACEHOLDERS = ("run_dir", "run_id", "max_steps")


@dataclass(frozen=True)
class Placement:
    """The lanes and CUDA devices a launch takes."""
    lot: str | None
    lanes: tuple[str, ...]
    devices: str  # CUDA_VISIBLE_DEVICES


@dataclass(frozen=True)
class LaunchedRun:
    """A launch that happened: its run id, process and time."""
    run_id: str
    popen: object  # subprocess.Popen, or None when found after a restart
    t: float


def base_env() -> dict[str, str]:
    """A run's environment: this copy of `tui` importable, output unbuffered."""
    return fresh_env() | {"PYTHONUNBUFFERED": "1"}


def expand_argv(argv, values: dict[str, str]) -> list[str]:
    """`{run_dir}`, `{run_id}`, `{max_steps}` in argv, expanded by us (never a shell)."""
    out = []
    for arg in argv:
        for name in PLACEHOLDERS:
            arg = arg.replace("{" + name + "}", values.get(name, ""))
        out.append(arg)
    return out


class Launcher:
    def __init__(self, plan: Plan, journal: Journal, runs_dir: Path, share=None,
                 processes: Processes | None = None):
        self.plan = plan
        self.processes = processes or HostProcesses()
        self.journal = journal
        self.runs_dir = runs_dir
        self.share = share  # campaign.boxes.BoxShare: this box's lots and variants; None: all
        self.lots = tuple(lot for lot in plan.lots if share is None or lot.id in share.lots)

    def launch_ready(self, now: float) -> list[LaunchedRun]:
        out = []
        for intent in next_intents(self.plan, self.journal.state, self.share):
            placement = self.free_lanes(intent.gpus, now)
            if placement is not None:
                launched = self._launch(intent, placement, now)
                if launched is not None:
                    out.append(launched)
            elif not self._lots_open(intent.gpus, now):
                # no lot that could ever hold it is still rented: skip it, never wait forever
                self.journal.record(RunSkipped(target=intent.target, kind=intent.kind,
                                    category=intent.category,
                                    reason=f"no lot with {intent.gpus} GPU(s) has window left"))
        return out

    def _lot_expired(self, lot, now: float) -> bool:
        state = self.journal.state
        if state.moves:  # on a box the campaign moved to: that box's own rental window
            return state.window_end is not None and now >= state.window_end
        start = state.window_start
        return start is not None and now >= start + lot.hours * 3600

    def _lots_open(self, gpus: int, now: float) -> bool:
        return any(lot.gpus >= gpus and not self._lot_expired(lot, now) for lot in self.lots)

    def free_lanes(self, gpus: int, now: float) -> Placement | None:
        if gpus == 0:
            return Placement(None, (), "")
        busy = {lane for r in self.journal.state.running for lane in r.lanes}
        for lot in self.lots:
            free = [k for k in range(lot.gpus) if f"{lot.id}:{k}" not in busy]
            if len(free) >= gpus and not self._lot_expired(lot, now):  # own window per lot
                chosen = free[:gpus]
                return Placement(lot.id, tuple(f"{lot.id}:{k}" for k in chosen),
                                 ",".join(str(lot.devices[k]) for k in chosen))
        return None

    def _attempt(self, intent: Intent, chash: str, config: dict) -> int:
        state = self.journal.state
        attempt = 1 + sum(1 for r in state.runs
                          if r.target == intent.target and r.config_hash == chash)
        while (self.runs_dir / run_id(intent.target, config, attempt)).exists():
            attempt += 1  # a run id's directory is never reused, whatever the ledger says
        return attempt

    def _launch(self, intent: Intent, placement: Placement, now: float) -> LaunchedRun | None:
        config = {"argv": list(intent.argv), "params": dict(intent.params),
                  "kind": intent.kind, "max_steps": intent.max_steps, "gpus": intent.gpus}
        chash = config_hash(config)
        attempt = self._attempt(intent, chash, config)
        rid = run_id(intent.target, config, attempt)
        run_dir = self.runs_dir / rid
        fields = dict(run=rid, target=intent.target, kind=intent.kind,
                      category=intent.category, attempt=attempt, config_hash=chash,
                      config=config, lanes=list(placement.lanes), devices=placement.devices,
                      lot=placement.lot, max_steps=intent.max_steps)
        if intent.resumes is not None:  # a run its box cut (or a retry): in the ledger, why
            fields.update(resumes=intent.resumes.run, resume_from=intent.resumes.checkpoint,
                          resume_reason=intent.resumes.reason)
            if intent.resumes.owner:  # an earlier attempt's newer checkpoint
                fields.update(resume_run=intent.resumes.owner)
            if intent.resumes.retry:  # relaunched after a hiccup (`[retry]`)
                fields.update(retry=intent.resumes.retry)
        # the intent claims the run (and its directory) before anything is on disk: a
        # crash from here on leaves nothing the next engine cannot account for
        self.journal.record(RunLaunchIntent(**fields))
        run_dir.mkdir(parents=True, exist_ok=False)
        argv = expand_argv(intent.argv, {"run_dir": str(run_dir), "run_id": rid,
                                         "max_steps": str(intent.max_steps or "")})
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable  # the interpreter itera-tui runs in
        (run_dir / "params.json").write_text(json.dumps(
            {"run": rid, "target": intent.target, "kind": intent.kind, "config": config,
             "config_hash": chash, "attempt": attempt}, indent=2, default=str))
        try:
            launched = self.processes.launch(argv, self._env(rid, run_dir, intent, placement),
                                      run_dir, self.plan.root)
        except OSError as exc:
            self.journal.record(RunLaunchFailed(run=rid, error=str(exc)))
            self.journal.record(WarningEvent(message=f"cannot launch {intent.target}: {exc}"))
            return None
        ev = self.journal.record(RunLaunched(pid=launched.pid,
                                 pid_start=launched.pid_start, **fields))
        return LaunchedRun(rid, launched.popen, ev.t)

    def _env(self, rid: str, run_dir: Path, intent: Intent, placement: Placement) -> dict:
        corpus = self.plan.corpus
        env = base_env() | {
            "ITERA_RUN_ID": rid, "ITERA_RUN_DIR": str(run_dir),
            "ITERA_METRICS": str(run_dir / "metrics.jsonl"),
            "ITERA_CONTROL": str(run_dir / "control.jsonl"),
            # the attempt's start on the clock that stamps requests (control.py): the
            # script itself starts later, and a request made meanwhile is for it
            "ITERA_LAUNCHED_AT": repr(time.time()),
            "CUDA_VISIBLE_DEVICES": placement.devices,
            "ITERA_PARAMS": json.dumps(dict(intent.params), default=str),
            "ITERA_CORPUS_ROOT": str(self.plan.root / (corpus.root if corpus else ".")),
        }
        if intent.max_steps:
            env["ITERA_MAX_STEPS"] = str(intent.max_steps)
        if intent.resumes is not None and intent.resumes.checkpoint:
            # the SDK's resume (`run.resume_from`) and the frameworks' (`resume_from()`)
            owner = intent.resumes.owner or intent.resumes.run
            cut = self.journal.state.run(owner)
            held = next((v.held for v in reversed(cut.verified) if v.ok and v.held
                         and v.path == intent.resumes.checkpoint), None) if cut else None
            env["ITERA_RESUME"] = str(resume_path(self.runs_dir, owner,
                                                  intent.resumes.checkpoint, held))
        if any(rule.rule == "resume" for rule in self.plan.stops):  # needs a checkpoint
            env["ITERA_FINAL_CHECKPOINT"] = "1"
        if corpus and corpus.max_len:
            env["ITERA_CORPUS_MAX_LEN"] = str(corpus.max_len)
        return env

    # -- after a crash between the intent and the launch record -----------------
    def settle_intents(self, events: list[Event]) -> None:
        """Intents with no `run_launched`: find the process or record it never started."""
        launched = {ev.run for ev in events if isinstance(
            ev, (RunLaunched, RunLaunchFailed, RunLaunchAbandoned))}
        for ev in events:
            if not isinstance(ev, RunLaunchIntent) or ev.run in launched:
                continue
            fields = {k: v for k, v in ev.to_record().items() if k not in ("seq", "t", "event")}
            rid = ev.run
            # the launcher started for this run, by run id, run directory and campaign
            # folder: the same run id in another copy of the campaign is never ours
            found = self.processes.find_launcher(
                RunIdentity.of(rid, self.runs_dir / rid, self.plan.root))
            if found is not None:
                self.journal.record(RunLaunched(pid=found.pid,
                                    pid_start=found.pid_start, note="found after a "
                                    "restart: launched just before the engine died", **fields))
            elif self.processes.read_exit(self.runs_dir / rid) is not None:
                self.journal.record(RunLaunched(pid=None, pid_start=None,
                                    note="ended before the engine came back", **fields))
            else:
                self.journal.record(RunLaunchAbandoned(run=rid,
                                    reason="the engine died before the process started"))


def resume_path(runs_dir: Path, rid: str, checkpoint: str, held: str | None = None) -> Path:
    """Where a cut run's checkpoint is on this box: acknowledged relative to its run
    directory (`itera-tui resume` fetches it back there); the engine's copy of it that
    verified (`held`), where it still has one: a file its script rewrote in place may
    hold a later, unverified save there, or half of one when the box went mid-save."""
    kept = held_path(runs_dir / rid, held)
    if kept is not None:
        return kept
    path = Path(checkpoint)
    return path if path.is_absolute() else runs_dir / rid / path

