"""kill -9 of `itera-tui run --headless` at five moments changes nothing a user keeps.

The engine is killed during the pilot, at the decision point, during the full
runs, while a checkpoint verification is in flight, and while the bundle is
built; each time it is started again. Afterwards no run was launched twice, no
metrics record was lost or doubled, no more than one verifier ever ran at once,
and the conclusion is the one an uninterrupted campaign reaches.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from clikit import cli
from conftest import REPO
from enginekit import wait_while_running, write_plan
from test_app_support import kill_runs, script_cmd
from tui.engine import read_ledger, replay

pytestmark = pytest.mark.slow

VARIANTS = "".join(f"""
[[variant]]
id = "{vid}"
category = "{cat}"
command = {script_cmd("ckpt_printer.py", "--steps", "40", "--sleep", "0.06")}
minutes = 1
steps = 40
""" for vid, cat in (("control", "mandatory"), ("b", "useful")))
PILOT = '[pilot]\nsteps = 6\ndecide = "ask"\n'
CHECKPOINTS = "[checkpoint]\nevery_minutes = 0.015\n"


def events(root: Path) -> list[dict]:
    return read_ledger(root / ".itera" / "ledger.jsonl")


def of(root: Path, kind: str) -> list[dict]:
    return [e for e in events(root) if e["event"] == kind]


class VerifierCount:
    """Samples, in the background, how many verifiers of this campaign run at once."""

    def __init__(self, root: Path):
        self.root = str(root)
        self.most = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self):
        while not self._stop.is_set():
            n = 0
            for proc in psutil.process_iter(["cmdline"]):
                cmd = " ".join(proc.info["cmdline"] or ())
                if "tui.training.file_check" in cmd and self.root in cmd:
                    n += 1
            self.most = max(self.most, n)
            time.sleep(0.05)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(5)
        return self.most


def headless(root: Path, *args: str) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "tui.cli", "run", "--headless", *args,
                             str(root / "campaign.toml")], cwd=root, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def kill_when(proc: subprocess.Popen, predicate, what: str, timeout: float = 90) -> None:
    wait_while_running(proc, predicate, timeout, what, every=0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)


def full_run_records(root: Path, n: int) -> bool:
    runs = [e["run"] for e in of(root, "run_launched") if e["kind"] == "run"]
    for rid in runs:
        path = root / ".itera" / "runs" / rid / "metrics.jsonl"
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return True
    return False


def verification_in_flight(root: Path) -> bool:
    done = {(e["run"], e["path"]) for e in of(root, "checkpoint_verified")}
    return any((e["run"], e["path"]) not in done and e["event"] == "checkpoint_verification_started"
               for e in of(root, "checkpoint_verification_started"))


def bundle_building(root: Path) -> bool:
    outputs = root / "outputs"
    return outputs.is_dir() and any(p.name.startswith(".bundle-staging-")
                                    for p in outputs.iterdir())


def conclusion(root: Path) -> dict:
    proc = cli("status", "--json", str(root / "campaign.toml"), cwd=root)
    data = json.loads(proc.stdout)
    accepted = data["budget"]["accepted_configs"]
    return {"text": data["conclusion"]["text"], "accepted": accepted}


def test_kill_9_at_five_moments_keeps_runs_records_and_the_conclusion(tmp_path):
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    for root in (killed, whole):
        root.mkdir()
        write_plan(root, VARIANTS, extra=CHECKPOINTS, gpus=2, pilot=PILOT)
    count = VerifierCount(killed)
    try:
        pilot_started = lambda: any(  # noqa: E731
            (killed / ".itera/runs" / e["run"] / "metrics.jsonl").exists()
            for e in of(killed, "run_launched") if e["kind"] == "pilot")
        kill_when(headless(killed), pilot_started, "the pilot")
        kill_when(headless(killed), lambda: of(killed, "decision_pending"), "the decision")
        kill_when(headless(killed, "--decide", "continue"),
                  lambda: full_run_records(killed, 8), "the full runs")
        kill_when(headless(killed), lambda: verification_in_flight(killed),
                  "a verification in flight")
        kill_when(headless(killed), lambda: bundle_building(killed), "the bundle build")
        last = headless(killed)
        assert last.wait(180) == 0
    finally:
        most = count.stop()
        kill_runs(replay(events(killed)))
    assert subprocess.run([sys.executable, "-m", "tui.cli", "run", "--headless", "--decide",
                           "continue", str(whole / "campaign.toml")], cwd=whole,
                          env=dict(os.environ, PYTHONPATH=str(REPO)), capture_output=True,
                          timeout=240).returncode == 0

    assert most <= 1  # the verification queue's bound held across five kills
    launched = [e["run"] for e in of(killed, "run_launched")]
    assert len(launched) == len(set(launched)) == 4  # 2 pilots + 2 runs, never twice
    state = replay(events(killed))
    for run in state.runs:
        steps = [json.loads(line).get("step") for line in
                 (killed / ".itera/runs" / run.id / "metrics.jsonl").read_text().splitlines()
                 if '"event"' not in line]
        assert steps == sorted(set(steps)), run.id  # no record lost or doubled
        bundled = killed / "outputs/bundle/runs" / run.id / "metrics.jsonl"
        assert bundled.read_bytes() == (killed / ".itera/runs" / run.id /
                                        "metrics.jsonl").read_bytes()
    assert conclusion(killed) == conclusion(whole)
    assert of(killed, "wrapup_done")[-1]["verified"] is True
