"""The campaign engine: one loop that launches, watches and stops runs.

One engine, two faces: `itera-tui run --headless` and the control room drive
this same class. Every fact goes to the ledger first; the in-memory state is
the ledger replayed, so a restart (even after kill -9) reattaches to runs
still alive and records those that ended meanwhile. Time is injected (`clock`)
and so are the probes, so tests can drive it precisely.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..campaign.plan import Plan
from . import process
from .checkpoint_interval import checkpoint_interval_minutes
from .errors import EngineError
from .ledger import Ledger, read_ledger
from .live import LiveView, RunLive
from .rules import RuleSet, Stop
from .runid import config_hash, run_id
from .scheduler import Intent, next_intents, phase_of
from .state import CampaignState, RunState, StateBuilder
from .watchdog import Watchdog

PACKAGE_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class EngineSnapshot:
    """Everything a view needs, frozen: safe to hand from a worker to the UI."""

    t: float
    state: CampaignState
    phase: str
    live: dict  # run id -> LiveView
    probe: object | None
    checkpoint_interval_min: float | None
    finished: bool


class Engine:
    def __init__(self, plan: Plan, clock: Callable[[], float] = time.time, probes=None,
                 poll_interval: float = 0.25, sample_interval: float = 10.0,
                 decide: str | None = None, on_event: Callable[[dict], None] | None = None,
                 idle_after_s: float = 600.0):
        self.plan = plan
        self.clock = clock
        self.probes = probes
        self.poll_interval = poll_interval
        self.sample_interval = sample_interval
        self.auto_decision = decide or ("continue" if plan.pilot and
                                        plan.pilot.decide == "continue" else None)
        self._decision_source = "cli" if decide else "config"
        self.on_event = on_event
        self.state_dir = plan.state_dir
        self.runs_dir = self.state_dir / "runs"
        self._lock = threading.RLock()
        self._builder = StateBuilder()
        self._live: dict[str, RunLive] = {}
        self._verifying: list[tuple[str, str, subprocess.Popen]] = []
        self._lock_file = None
        self._last_sample_t = 0.0
        self.last_probe = None
        self._watchdog = Watchdog(idle_after_s)
        self.ledger: Ledger | None = None

    # -- lifecycle -------------------------------------------------------
    def open(self) -> "Engine":
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self._take_lock()
        self.ledger = Ledger(self.state_dir / "ledger.jsonl", self.clock)
        for ev in read_ledger(self.ledger.path):
            self._builder.apply(ev)
        now = self.clock()
        if self.state.started_t is None:
            self._freeze_plan()
        elif self.state.plan_sha256 != self._plan_sha256():
            self._record("warning", message="campaign.toml changed since the campaign "
                         "started; the frozen plan in .itera/plan.toml is kept as planned")
        if self.state.window_start is None:
            start = (self.plan.window.start.timestamp() if self.plan.window.start
                     else now)
            self._record("window_started", start=start,
                         end=start + self.plan.window_hours * 3600,
                         hours=self.plan.window_hours)
        self._record("engine_started", pid=os.getpid())
        self._reattach(now)
        return self

    def close(self) -> None:
        """Leave the runs alone: they live in their own sessions."""
        with self._lock:
            if self.ledger is not None:
                self._record("engine_stopped", pid=os.getpid())
            if self._lock_file is not None:
                self._lock_file.close()
                self._lock_file = None

    def _take_lock(self) -> None:
        path = self.state_dir / "engine.lock"
        f = open(path, "a+")
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            f.seek(0)
            holder = f.read().strip() or "?"
            f.close()
            raise EngineError(f"another itera-tui (pid {holder}) is driving this campaign; "
                              "use `itera-tui status` to watch it") from None
        f.seek(0)
        f.truncate()
        f.write(str(os.getpid()))
        f.flush()
        self._lock_file = f

    def _plan_sha256(self) -> str:
        return hashlib.sha256(self.plan.path.read_bytes()).hexdigest()

    def _freeze_plan(self) -> None:
        import tomli_w

        frozen = self.state_dir / "plan.toml"
        if not frozen.exists():
            tmp = frozen.with_suffix(".tmp")
            tmp.write_bytes(tomli_w.dumps(self.plan.raw).encode())
            os.replace(tmp, frozen)
        from .. import __version__

        self._record("campaign_started", plan_sha256=self._plan_sha256(),
                     frozen_plan=".itera/plan.toml", tool_version=__version__)

    @property
    def state(self) -> CampaignState:
        return self._builder.freeze()

    def _record(self, event: str, **fields) -> dict:
        ev = self.ledger.append(event, **fields)
        self._builder.apply(ev)
        if self.on_event is not None:
            self.on_event(ev)
        return ev

    def _reattach(self, now: float) -> None:
        for run in self.state.running:
            run_dir = self.runs_dir / run.id
            live = self._make_live(run)
            exit_info = process.read_exit(run_dir)
            stopped = run.stop is not None
            live.poll(now, evaluate=not stopped)
            self._ack_events(run.id, live)
            if exit_info is not None:
                self._record("run_exited", run=run.id, exit_code=exit_info.get("exit_code"),
                             note="ended while the control room was down")
            elif process.same_process(run.pid, run.pid_start):
                self._record("run_reattached", run=run.id, pid=run.pid)
            else:
                self._record("run_exited", run=run.id, exit_code=None,
                             note="process vanished while the control room was down "
                                  "(no exit status)")
        for run in self.state.runs:  # finished runs: history for the views
            if run.id not in self._live:
                self._make_live(run).poll(now, evaluate=False)

    def _make_live(self, run: RunState) -> RunLive:
        variant = run.target
        rules = RuleSet(self.plan.stops, variant, run.kind)
        live = RunLive(run.id, self.runs_dir / run.id, rules, self.plan.metrics,
                       self.plan.campaign.metric, self.plan.campaign.direction,
                       run.launched_t or self.clock())
        live.control_seq = _count_lines(self.runs_dir / run.id / "control.jsonl")
        acks = [c["t"] for c in run.checkpoints]
        live.last_checkpoint_request_t = max([live.started_t] + acks)
        self._live[run.id] = live
        return live

    # -- the loop --------------------------------------------------------
    def tick(self) -> None:
        with self._lock:
            now = self.clock()
            for run in self.state.running:
                self._watch(run, now)
            self._poll_verifications()
            self._maybe_sample(now)
            self._maybe_decide()
            self._launch_ready(now)

    def _watch(self, run: RunState, now: float) -> None:
        live = self._live.get(run.id) or self._make_live(run)
        stop = live.poll(now, evaluate=run.stop is None)
        self._ack_events(run.id, live)
        if stop is not None:
            self._fire(run, stop, now)
            run = self.state.run(run.id)
        if run.stop is None:
            tick_stop = live.rules.on_tick(now, live.started_t, live.last_record_t,
                                           run.last_verified_checkpoint is not None, run.kind)
            if tick_stop is not None:
                self._fire(run, tick_stop, now)
                run = self.state.run(run.id)
        self._pilot_time_box(run, now)
        self._maybe_periodic_checkpoint(run, live, now)
        if self._exited(run, live):
            last = live.poll(now, evaluate=self.state.run(run.id).stop is None)
            self._ack_events(run.id, live)
            if last is not None:  # the run wrote its last records and left
                self._record_stop(run.id, last)
            code = self._exit_code(run, live)
            self._record("run_exited", run=run.id, exit_code=code,
                         duration_s=round(now - (run.launched_t or now), 3))
            return
        requested = run.stop_requested
        if requested and requested.get("deadline") and now >= requested["deadline"] \
                and not requested.get("killed"):
            process.kill(run.pid)
            self._record("run_killed", run=run.id, signal="SIGKILL",
                         after_s=round(now - requested["t"], 3))

    def _exited(self, run: RunState, live: RunLive) -> bool:
        if live.popen is not None:
            return live.popen.poll() is not None
        return not process.same_process(run.pid, run.pid_start)

    def _exit_code(self, run: RunState, live: RunLive) -> int | None:
        info = process.read_exit(self.runs_dir / run.id)
        if info is not None:
            return info.get("exit_code")
        if live.popen is not None and live.popen.returncode is not None:
            return live.popen.returncode
        return None

    def _record_stop(self, rid: str, stop: Stop) -> None:
        fields = stop.to_dict()
        self._record("stop_rule_fired", run=rid, rule=fields["rule"], reason=fields["reason"],
                     value=fields["value"], step=fields["step"], record_t=fields["t"])

    def _fire(self, run: RunState, stop: Stop, now: float) -> None:
        self._record_stop(run.id, stop)
        self._request_stop(run, by="rule", reason=f"{stop.rule}: {stop.reason}", now=now)

    def _request_stop(self, run: RunState, by: str, reason: str, now: float) -> None:
        deadline = now + self.plan.grace_seconds
        self._record("run_stop_requested", run=run.id, by=by, reason=reason,
                     signal="SIGTERM", deadline=deadline)
        self._write_control(run.id, "stop")
        process.terminate(run.pid)

    def _ack_events(self, rid: str, live: RunLive) -> None:
        known = {(c.get("path"), c.get("sha256")) for c in self.state.run(rid).checkpoints}
        for ev in live.take_events():
            if ev.get("event") == "checkpoint" and (ev.get("path"), ev.get("sha256")) not in known:
                self._record("checkpoint_acknowledged", run=rid, **{
                    k: ev.get(k) for k in ("path", "sha256", "bytes", "write_s", "block_s",
                                           "step", "mode")})
                known.add((ev.get("path"), ev.get("sha256")))
                self._start_verification(rid, ev.get("path"))
            elif ev.get("event") == "resume_check" and self.state.run(rid).resume_check is None:
                self._record("resume_check_result", run=rid, ok=ev.get("ok"),
                             steps_compared=ev.get("steps_compared"),
                             max_abs_diff=ev.get("max_abs_diff"), problem=ev.get("problem"))

    def _start_verification(self, rid: str, rel_path: str | None) -> None:
        if not rel_path:
            return
        path = (self.runs_dir / rid / rel_path)
        cmd = [sys.executable, "-m", "tui.training.verify", str(path), "--json"]
        popen = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 stdin=subprocess.DEVNULL, env=self._base_env(),
                                 text=True)
        self._verifying.append((rid, rel_path, popen))

    def _poll_verifications(self) -> None:
        pending = []
        for rid, rel_path, popen in self._verifying:
            if popen.poll() is None:
                pending.append((rid, rel_path, popen))
                continue
            out = popen.stdout.read() if popen.stdout else ""
            try:
                verdict = json.loads(out.strip().splitlines()[-1])
            except (ValueError, IndexError):
                verdict = {"ok": False, "problem": f"verifier exited {popen.returncode}"}
            self._record("checkpoint_verified", run=rid, path=rel_path,
                         ok=bool(verdict.get("ok")) and popen.returncode == 0,
                         problem=verdict.get("problem"), step=verdict.get("step"))
        self._verifying = pending

    def _maybe_periodic_checkpoint(self, run: RunState, live: RunLive, now: float) -> None:
        if run.kind != "run" or run.stop_requested:
            return
        interval = self.checkpoint_interval_min()
        if interval is None:
            return
        if now - live.last_checkpoint_request_t >= interval * 60:
            self._checkpoint(run, by="schedule", now=now)

    def checkpoint_interval_min(self) -> float | None:
        costs = [c["write_s"] for r in self.state.runs for c in r.checkpoints
                 if isinstance(c.get("write_s"), (int, float))]
        measured = sorted(costs)[len(costs) // 2] if costs else None
        return checkpoint_interval_minutes(self.plan.checkpoint, measured)

    def _checkpoint(self, run: RunState, by: str, now: float) -> int:
        seq = self._write_control(run.id, "checkpoint")
        self._live[run.id].last_checkpoint_request_t = now
        self._record("checkpoint_requested", run=run.id, seq=seq, by=by)
        return seq

    def _write_control(self, rid: str, request: str) -> int:
        live = self._live[rid]
        live.control_seq += 1
        line = json.dumps({"seq": live.control_seq, "request": request,
                           "t": self.clock()}) + "\n"
        with open(self.runs_dir / rid / "control.jsonl", "a") as f:
            f.write(line)
            f.flush()
            os.fsync(f.fileno())
        return live.control_seq

    def _pilot_time_box(self, run: RunState, now: float) -> None:
        pilot = self.plan.pilot
        if (run.kind == "pilot" and pilot and pilot.hours and not run.stop_requested
                and now - (run.launched_t or now) > pilot.hours * 3600):
            self._request_stop(run, by="pilot", reason="pilot time box reached", now=now)

    def _maybe_sample(self, now: float) -> None:
        if self.probes is None or now - self._last_sample_t < self.sample_interval:
            return
        self._last_sample_t = now
        sample = self.probes.sample(now)
        self.last_probe = sample
        line = json.dumps(sample.to_dict()) + "\n"
        running = self.state.running
        for run in running:
            with open(self.runs_dir / run.id / "samples.jsonl", "a") as f:
                f.write(line)
        self.observe_probe(sample)

    def observe_probe(self, sample) -> list[str]:
        """Feed a probe sample to the watchdog; its warnings go to the ledger."""
        with self._lock:
            messages = self._watchdog.check(self.clock(), sample, self.state.running)
            for message in messages:
                self._record("warning", message=message)
            return messages

    # -- decisions and launches -------------------------------------------
    def _maybe_decide(self) -> None:
        state = self.state
        if phase_of(self.plan, state) != "decision":
            return
        if state.decision_pending is None:
            self._record("decision_pending", pilot=self._pilot_figures())
        if self.auto_decision:
            decision, self.auto_decision = self.auto_decision, None
            self.decide(decision, by=self._decision_source)

    def _pilot_figures(self) -> dict:
        out = {}
        for run in self.state.runs:
            if run.kind == "pilot":
                view = self._live[run.id].view() if run.id in self._live else None
                out[run.target] = {"run": run.id, "state": run.state, "stop": run.stop,
                                   "metric": view.best_metric if view else None,
                                   "last_loss": view.last_loss if view else None,
                                   "step": view.last_step if view else None}
        return out

    def _launch_ready(self, now: float) -> None:
        for intent in next_intents(self.plan, self.state):
            lanes = self._free_lanes(intent.gpus)
            if lanes is None:
                continue
            self._launch(intent, lanes, now)

    def _free_lanes(self, gpus: int):
        if gpus == 0:
            return (None, (), "")
        state = self.state
        busy = {lane for r in state.running for lane in r.lanes}
        now = self.clock()
        offset = 0
        for lot in self.plan.lots:
            free = [k for k in range(lot.gpus) if f"{lot.id}:{k}" not in busy]
            devices = lot.devices or tuple(range(offset, offset + lot.gpus))
            offset += lot.gpus
            expired = (state.window_start is not None
                       and now >= state.window_start + lot.hours * 3600)
            if len(free) >= gpus and not expired:  # each lot has its own window
                chosen = free[:gpus]
                return (lot.id, tuple(f"{lot.id}:{k}" for k in chosen),
                        ",".join(str(devices[k]) for k in chosen))
        return None

    def _launch(self, intent: Intent, lanes, now: float) -> None:
        lot, lane_ids, devices = lanes
        argv = list(intent.argv)
        if argv and argv[0] in ("python", "python3"):
            argv[0] = sys.executable  # the interpreter itera-tui runs in
        config = {"argv": list(intent.argv), "params": dict(intent.params),
                  "kind": intent.kind, "max_steps": intent.max_steps, "gpus": intent.gpus}
        chash = config_hash(config)
        attempt = 1 + sum(1 for r in self.state.runs
                          if r.target == intent.target and r.config_hash == chash)
        rid = run_id(intent.target, config, attempt)
        run_dir = self.runs_dir / rid
        run_dir.mkdir(parents=True, exist_ok=True)
        env = self._base_env() | {
            "ITERA_RUN_ID": rid, "ITERA_RUN_DIR": str(run_dir),
            "ITERA_METRICS": str(run_dir / "metrics.jsonl"),
            "ITERA_CONTROL": str(run_dir / "control.jsonl"),
            "CUDA_VISIBLE_DEVICES": devices,
            "ITERA_PARAMS": json.dumps(dict(intent.params), default=str),
            "ITERA_CORPUS_ROOT": str(self.plan.root / (self.plan.corpus.root
                                                       if self.plan.corpus else ".")),
        }
        if intent.max_steps:
            env["ITERA_MAX_STEPS"] = str(intent.max_steps)
        (run_dir / "params.json").write_text(json.dumps(
            {"run": rid, "target": intent.target, "kind": intent.kind, "config": config,
             "config_hash": chash, "attempt": attempt}, indent=2, default=str))
        try:
            launched = process.launch(argv, env, run_dir, self.plan.root)
        except OSError as exc:
            self._record("warning", message=f"cannot launch {intent.target}: {exc}")
            return
        ev = self._record("run_launched", run=rid, target=intent.target, kind=intent.kind,
                          category=intent.category, attempt=attempt, config_hash=chash,
                          config=config, pid=launched.pid, pid_start=launched.pid_start,
                          lanes=list(lane_ids), devices=devices, lot=lot,
                          max_steps=intent.max_steps)
        live = self._make_live(self.state.run(rid))
        live.popen = launched.popen
        live.started_t = ev["t"]
        live.last_checkpoint_request_t = ev["t"]

    def _base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(PACKAGE_ROOT), env.get("PYTHONPATH", "")) if p)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    # -- actions (from the control room or the command line) ---------------
    def decide(self, decision: str, by: str = "user", note: str | None = None) -> None:
        """continue | drop:ID[,ID] | wrapup — only at the decision point."""
        with self._lock:
            drop: list[str] = []
            kind = decision
            if decision.startswith("drop:"):
                kind, drop = "drop", [d for d in decision[5:].split(",") if d]
                for vid in drop:
                    self._check_droppable(vid)
            elif decision not in ("continue", "wrapup"):
                raise EngineError(f"unknown decision {decision!r}: expected continue, "
                                  "drop:ID or wrapup")
            self._record("decision_taken", decision=kind, drop=drop, by=by, note=note)
            for vid in drop:
                self._record("variant_dropped", variant=vid, reason=f"decision by {by}")

    def _check_droppable(self, vid: str) -> None:
        try:
            variant = self.plan.variant(vid)
        except KeyError:
            raise EngineError(f"no variant {vid!r} to drop") from None
        if not variant.optional:
            raise EngineError(f"cannot drop {vid!r}: it is mandatory (needed to conclude); "
                              "only useful or exploratory variants can be dropped")

    def drop_variant(self, vid: str, by: str = "user") -> None:
        with self._lock:
            self._check_droppable(vid)
            if vid in self.state.dropped:
                return
            self._record("variant_dropped", variant=vid, reason=f"dropped by {by}")
            for run in self.state.running:
                if run.target == vid:
                    self._request_stop(run, by="user", reason="variant dropped",
                                       now=self.clock())

    def stop_run(self, rid: str, reason: str, by: str = "user") -> None:
        with self._lock:
            run = self.state.run(rid)
            if run.state != "running":
                raise EngineError(f"run {rid} is not running ({run.state})")
            self._request_stop(run, by=by, reason=reason, now=self.clock())

    def request_checkpoint(self, rid: str, by: str = "user") -> int:
        with self._lock:
            run = self.state.run(rid)
            if run.state != "running":
                raise EngineError(f"run {rid} is not running ({run.state})")
            return self._checkpoint(run, by=by, now=self.clock())

    def set_paused(self, paused: bool) -> None:
        with self._lock:
            if paused != self.state.paused:
                self._record("queue_paused" if paused else "queue_resumed")

    def begin_wrapup(self) -> None:
        """Stop what still runs (the SDK checkpoints on SIGTERM), then wrap up."""
        with self._lock:
            if self.state.wrapup is None:
                self._record("wrapup_started")
            now = self.clock()
            for run in self.state.running:
                if not run.stop_requested:
                    self._checkpoint(run, by="wrapup", now=now)
                    self._request_stop(run, by="wrapup", reason="stopped for wrap-up",
                                       now=now)

    def record_wrapup(self, bundle: str, verified: bool, failures: int) -> None:
        with self._lock:
            self._record("wrapup_done", bundle=bundle, verified=verified, failures=failures)

    # -- views -------------------------------------------------------------
    @property
    def finished(self) -> bool:
        state = self.state
        return not state.running and phase_of(self.plan, state) in ("finished", "wrapup")

    def snapshot(self) -> EngineSnapshot:
        with self._lock:
            state = self.state
            live = {rid: lv.view() for rid, lv in self._live.items()}
            return EngineSnapshot(t=self.clock(), state=state,
                                  phase=phase_of(self.plan, state), live=live,
                                  probe=self.last_probe,
                                  checkpoint_interval_min=self.checkpoint_interval_min(),
                                  finished=not state.running and phase_of(
                                      self.plan, state) in ("finished", "wrapup"))

    def live_view(self, rid: str) -> LiveView | None:
        with self._lock:
            live = self._live.get(rid)
            return live.view() if live else None


def _count_lines(path: Path) -> int:
    try:
        with open(path, "rb") as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0
