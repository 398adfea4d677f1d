"""The engine as a process and its clients, measured side by side.

One detached engine (`itera-tui engine start`, as the room starts it) drives
three runs printing 50 records a second each (SDK JSONL, the fastest feed):

1. key press to acknowledgement through the socket: the round trip of an
   action a room sends (pause / resume, answered after its ledger line is
   fsync'ed), median over `--actions`; goal <= 50 ms (absolute).
2. the engine's CPU with 3 rooms attached (snapshots and the event stream to
   each) against the same engine with no client, each over `--seconds`;
   goal <= 1.5x.
3. stop latency with no face open: a NaN record written into a live run's
   metrics file; from that record's own "t" to the engine's
   `stop_rule_fired`, against the engine's poll interval (0.5 s); goal < 2x.
4. the engine killed with SIGKILL: seconds until its supervisor's new engine
   answers a client (reattached from the ledger); goal <= 10 s.

    python bench/service_bench.py [--seconds 10] [--actions 100] [--quick] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.figures import Figure, ratio_figure, report  # noqa: E402

PRINTER = ROOT / "tests" / "scripts" / "printer.py"
POLL_S = 0.5  # the detached engine's poll interval (tui.service.daemon)


def campaign(root: Path) -> Path:
    def variant(vid: str, cat: str, extra: list[str]) -> str:
        argv = [sys.executable, str(PRINTER), "--jsonl", "--steps", "10000000",
                "--sleep", "0.02", *extra]
        return (f'\n[[variant]]\nid = "{vid}"\ncategory = "{cat}"\n'
                f"command = {json.dumps(argv)}\nminutes = 1\n")
    text = """
[campaign]
name = "service bench"
question = "what do clients cost the engine?"
metric = "acc"

[[lot]]
gpu = "cpu"
hours = 1
price_usd = 1.0
gpus = 4

[[stop]]
rule = "non_finite"
metrics = ["loss"]
""" + "".join(variant(v, c, []) for v, c in (("control", "mandatory"), ("b", "useful"),
                                             ("c", "useful")))
    path = root / "campaign.toml"
    path.write_text(text)
    return path


def engine_cpu(pid: int, seconds: float) -> float:
    proc = psutil.Process(pid)
    procs = [proc]

    def total():
        out = 0.0
        for p in procs:
            try:
                t = p.cpu_times()
                out += t.user + t.system
            except psutil.Error:
                pass
        return out

    before, t0 = total(), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (total() - before) / (time.monotonic() - t0)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0,
                        help="CPU sampling per round (two rounds each, alternating)")
    parser.add_argument("--actions", type=int, default=100)
    parser.add_argument("--quick", action="store_true", help="8 s of CPU, 40 actions")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    seconds, actions = (8.0, 40) if args.quick else (args.seconds, args.actions)
    from tui.campaign import load_plan
    from tui.service.starter import connect

    env = dict(os.environ, PYTHONPATH=str(ROOT))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        path = campaign(root)
        plan = load_plan(path)
        clients = []
        try:
            probe = connect(plan, start=True, name="bench")
            pid = probe.engine_pid
            deadline = time.monotonic() + 60
            while len([r for r in probe.step().state.runs if r.state == "running"]) < 3:
                assert time.monotonic() < deadline, "the three runs did not start"
                time.sleep(0.2)
            time.sleep(2.0)  # settle: the feeds caught up with the start
            lat = []
            for i in range(actions):
                t0 = time.perf_counter()
                result = probe.pause(i % 2 == 0)
                lat.append(1000 * (time.perf_counter() - t0))
                assert result.ok, result.message
            probe.pause(False)
            probe.close()
            alone = watched = 0.0
            for _ in range(2):  # alternating, so a noisy neighbour hits both alike
                alone += engine_cpu(pid, seconds) / 2
                for i in range(3):
                    clients.append(connect(plan, start=False, name=f"room{i}"))
                time.sleep(1.0)
                watched += engine_cpu(pid, seconds) / 2
                for client in clients:
                    client.close()
                clients.clear()
                time.sleep(1.0)
            # stop latency with no face open: a NaN record, timed from its own "t"
            latency = nan_stop_latency(root, plan)
            back = restart_time(plan, pid)
        finally:
            for client in clients:
                client.close()
            subprocess.run([sys.executable, "-m", "tui.cli", "engine", "stop", str(path)],
                           cwd=root, env=env, capture_output=True, timeout=60)
            kill_runs(root)
    print(f"note: {actions} actions, engine CPU over {seconds:g} s each, 3 runs x 50 rec/s",
          file=sys.stderr)
    figures = [
        Figure("key press to ack through the socket, median", statistics.median(lat), None,
               "ms", "<= 50 ms", statistics.median(lat) <= 50.0),
        ratio_figure("engine CPU, 3 rooms attached vs none", watched, max(alone, 0.1), "%",
                     "<= 1.5x"),
        ratio_figure("stop latency, no face open, vs poll", latency, POLL_S, "s", "< 2x"),
        Figure("engine answering again after kill -9", back, None, "s", "<= 10 s",
               back <= 10.0),
    ]
    report(figures, as_json=args.json)
    return 0


def nan_stop_latency(root: Path, plan) -> float:
    """Write a NaN loss record into the live control run's metrics file, as its script
    would, and time the engine's stop from that record's own "t"."""
    from tui.engine import read_ledger, replay

    state = replay(read_ledger(root / ".itera/ledger.jsonl"))
    run = next(r for r in state.runs if r.target == "c" and r.state == "running")
    metrics = root / ".itera/runs" / run.id / "metrics.jsonl"
    t = time.time()
    with open(metrics, "a") as f:
        f.write(json.dumps({"t": t, "step": 10 ** 9, "loss": "nan"}) + "\n")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        fired = [e for e in read_ledger(root / ".itera/ledger.jsonl")
                 if e["event"] == "stop_rule_fired" and e["run"] == run.id]
        if fired:
            return fired[0]["t"] - t
        time.sleep(0.05)
    raise RuntimeError("the NaN record was not stopped within 30 s")


def restart_time(plan, pid: int) -> float:
    """kill -9 the engine; seconds until its supervisor's new engine answers a client."""
    import signal

    from tui.service.client import EngineUnavailable
    from tui.service.starter import connect

    t0 = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    deadline = t0 + 60
    while time.monotonic() < deadline:
        try:
            client = connect(plan, start=False, name="bench")
        except EngineUnavailable:
            time.sleep(0.05)
            continue
        new_pid = client.engine_pid
        client.close()
        if new_pid != pid:
            return time.monotonic() - t0
        time.sleep(0.05)
    raise RuntimeError("the engine was not back within 60 s")


def kill_runs(root: Path) -> None:
    import signal

    from tui.engine import read_ledger, replay

    ledger = root / ".itera/ledger.jsonl"
    if not ledger.exists():
        return
    for run in replay(read_ledger(ledger)).runs:
        if run.pid:
            try:
                os.killpg(run.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


if __name__ == "__main__":
    sys.exit(main())
