"""Launching runs: free GPU lanes, the run protocol's environment, the run id.

Placement follows the calendar's rule: a run that needs N GPUs gets N free
lanes of one lot (lots never merge memory), and a lot whose own window has
ended takes nothing new. Each run gets its own directory, its resolved
configuration (`params.json`) and the ITERA_* environment of DESIGN.md.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from . import process
from .runid import config_hash, run_id
from .scheduler import Intent, next_intents

PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # so `python -m tui...` works unpackaged


class LaunchMixin:
    """Part of Engine; uses its ledger, state, live views and plan."""

    def _launch_ready(self, now: float) -> None:
        for intent in next_intents(self.plan, self.state):
            lanes = self._free_lanes(intent.gpus)
            if lanes is not None:
                self._launch(intent, lanes, now)
            elif not self._lots_open(intent.gpus, now):
                # no lot that could ever hold it is still rented: skip it, never wait forever
                self._record("run_skipped", target=intent.target, kind=intent.kind,
                             category=intent.category,
                             reason=f"no lot with {intent.gpus} GPU(s) has window left")

    def _lot_expired(self, lot, now: float) -> bool:
        start = self.state.window_start
        return start is not None and now >= start + lot.hours * 3600

    def _lots_open(self, gpus: int, now: float) -> bool:
        return any(lot.gpus >= gpus and not self._lot_expired(lot, now) for lot in self.plan.lots)

    def _free_lanes(self, gpus: int):
        if gpus == 0:
            return (None, (), "")
        busy = {lane for r in self.state.running for lane in r.lanes}
        now = self.clock()
        for lot in self.plan.lots:
            free = [k for k in range(lot.gpus) if f"{lot.id}:{k}" not in busy]
            if len(free) >= gpus and not self._lot_expired(lot, now):  # own window per lot
                chosen = free[:gpus]
                return (lot.id, tuple(f"{lot.id}:{k}" for k in chosen),
                        ",".join(str(lot.devices[k]) for k in chosen))
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
        if self.plan.corpus and self.plan.corpus.max_len:
            env["ITERA_CORPUS_MAX_LEN"] = str(self.plan.corpus.max_len)
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

