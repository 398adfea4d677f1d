"""Helpers for framework integration tests: a training script as a real process
with the run protocol's environment, its metrics, and engine-style requests."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "tests" / "scripts"


@dataclass
class ScriptRun:
    """One training process launched the way the engine launches a run."""

    run_dir: Path
    popen: subprocess.Popen
    seq: int = 0

    @property
    def metrics_path(self) -> Path:
        return self.run_dir / "metrics.jsonl"

    def records(self) -> list[dict]:
        return read_records(self.metrics_path)

    def losses(self) -> dict[int, float]:
        return {r["step"]: r["loss"] for r in self.records()
                if "event" not in r and isinstance(r.get("loss"), float)}

    def acks(self) -> list[dict]:
        return [r for r in self.records() if r.get("event") == "checkpoint"]

    def request(self, what: str) -> int:
        """Append a request to the control file as the engine does (seq, request, t)."""
        self.seq += 1
        with open(self.run_dir / "control.jsonl", "a") as f:
            f.write(json.dumps({"seq": self.seq, "request": what, "t": time.time()}) + "\n")
            f.flush()
            os.fsync(f.fileno())
        return self.seq

    def wrapup_stop(self) -> None:
        """What the engine's wrap-up does: a checkpoint request, a stop request, SIGTERM."""
        self.request("checkpoint")
        self.request("stop")
        os.killpg(self.popen.pid, signal.SIGTERM)

    def wait_for(self, predicate, timeout: float = 60.0, what: str = "condition"):
        deadline = time.time() + timeout
        while time.time() < deadline:
            found = predicate(self)
            if found:
                return found
            if self.popen.poll() is not None:
                found = predicate(self)
                if found:
                    return found
                raise AssertionError(f"process exited {self.popen.returncode} before {what}:\n"
                                     + self.stderr_tail())
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}:\n" + self.stderr_tail())

    def finish(self, timeout: float = 90.0) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.popen.pid, signal.SIGKILL)
            raise

    def stderr_tail(self, lines: int = 25) -> str:
        try:
            text = (self.run_dir / "stderr.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])


def read_records(path: Path) -> list[dict]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def launch(script: str, run_dir: Path, *args: str, cwd: Path | None = None,
           env: dict | None = None) -> ScriptRun:
    """Start tests/scripts/SCRIPT in its own session with the ITERA_* environment."""
    run_dir.mkdir(parents=True, exist_ok=True)
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ITERA_")}
    full_env.update({
        "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        "PYTHONUNBUFFERED": "1", "ITERA_RUN_ID": run_dir.name, "ITERA_RUN_DIR": str(run_dir),
        "ITERA_METRICS": str(run_dir / "metrics.jsonl"),
        "ITERA_CONTROL": str(run_dir / "control.jsonl"),
        "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
    })
    full_env.update(env or {})
    with open(run_dir / "stdout.log", "wb") as out, open(run_dir / "stderr.log", "wb") as err:
        popen = subprocess.Popen([sys.executable, str(SCRIPTS / script), *args],
                                 cwd=cwd or run_dir.parent, env=full_env, stdout=out, stderr=err,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
    return ScriptRun(run_dir=run_dir, popen=popen)


def is_non_finite(value) -> bool:
    return isinstance(value, float) and not math.isfinite(value)
