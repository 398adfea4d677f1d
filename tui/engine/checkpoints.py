"""The engine's side of checkpoints: requests, acknowledgements, verification.

Requests go to the run's control file (on a schedule, on a key, before a
wrap-up stop); the SDK acknowledges in the metrics stream; every acknowledged
file is then verified in a fresh process (`python -m tui.training.verify`)
without blocking the loop, and the verdict goes to the ledger, where the
`resume` rule and the views find it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from .checkpoint_interval import checkpoint_interval_minutes
from .live import RunLive
from .state import RunState


class CheckpointMixin:
    """Part of Engine; uses its ledger, state, live views and plan."""

    def _ack_events(self, rid: str, live: RunLive) -> None:
        known = {(c.get("path"), c.get("sha256")) for c in self.state.run(rid).checkpoints}
        for ev in live.take_events():
            if ev.get("event") == "checkpoint" and (ev.get("path"), ev.get("sha256")) not in known:
                self._record("checkpoint_acknowledged", run=rid, **{
                    k: ev.get(k) for k in ("path", "sha256", "bytes", "write_s", "block_s",
                                           "step", "mode")})
                known.add((ev.get("path"), ev.get("sha256")))
                self._start_verification(rid, ev.get("path"))
            elif ev.get("event") == "checkpoint_failed":
                message = f"checkpoint of {rid} at step {ev.get('step')} FAILED: {ev.get('error')}"
                if message not in {w.get("message") for w in self.state.warnings}:  # re-read
                    self._record("warning", message=message, run=rid)
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
        self._record("checkpoint_requested", run=run.id, request_seq=seq, by=by)
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

