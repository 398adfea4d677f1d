"""The control room's own cost: CPU while watching live runs, peak RSS after a big backlog.

Runs the real `itera-tui PATH` in a pseudo-terminal (the real terminal driver,
so drawing and writing escape sequences are counted) on a campaign of three
runs on a 3-lane lot. Each run first writes a backlog of `--records` metrics
records (default 1,000,000) and then logs `--rate` records/s (default 50).

1. wait until every run wrote its backlog and the app has ingested it (its
   CPU falls back under 15 % for 3 s in a row), then read its peak RSS (VmHWM);
2. measure the app's CPU (user + system, all its threads, percent of one core)
   over `--seconds` (default 60) while the three runs keep logging;
3. press `q`: the app quits and the runs are left alive (then killed here).

Goals: under 3 % of one core, under 200 MB peak RSS.

    python bench/app_bench.py                 # the full run (about 2-3 minutes)
    python bench/app_bench.py --seconds 10 --records 100000   # a quick look (= --quick)
    python bench/app_bench.py --quick --json   # the figures as one JSON list
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import textwrap
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.figures import ROOM_CPU_GOAL_PCT as CPU_GOAL_PCT, Figure, report  # noqa: E402

RSS_GOAL_MB = 200.0

WRITER = '''
import os, sys, time
backlog, rate = int(sys.argv[1]), float(sys.argv[2])
out = open(os.environ["ITERA_METRICS"], "a", buffering=1 << 20)
t0 = time.time()
line = '{"t": %.3f, "step": %d, "loss": %.6f, "acc": %.4f}\\n'
for step in range(1, backlog + 1):
    out.write(line % (t0, step, 2.0 / (1 + step) ** 0.5, 0.5 + step / (4 * backlog)))
out.flush()
open(os.path.join(os.environ["ITERA_RUN_DIR"], "backlog_done"), "w").close()
step, next_t = backlog, time.time()
while True:
    step += 1
    out.write(line % (time.time(), step, 2.0 / (1 + step) ** 0.5, 0.75))
    out.flush()
    next_t += 1.0 / rate
    time.sleep(max(0.0, next_t - time.time()))
'''


def write_campaign(root: Path, records: int, rate: float) -> Path:
    writer = root / "writer.py"
    writer.write_text(WRITER)
    variants = "".join(textwrap.dedent(f"""
        [[variant]]
        id = "{vid}"
        category = "{cat}"
        command = {json.dumps([sys.executable, str(writer), str(records), str(rate)])}
        hours = 24
        """) for vid, cat in (("control", "mandatory"), ("b", "useful"),
                              ("c", "exploratory")))
    path = root / "campaign.toml"
    path.write_text(textwrap.dedent("""
        [campaign]
        name = "app-bench"
        question = "what does the control room cost?"
        metric = "acc"

        [[lot]]
        gpu = "cpu"
        hours = 72
        price_usd = 1.0
        gpus = 3
        """) + variants)
    return path


def start_app(path: Path, cols: int, rows: int) -> tuple[subprocess.Popen, int, list[int]]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    env = dict(os.environ, TERM="xterm-256color", COLUMNS=str(cols), LINES=str(rows))
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", str(path)], cwd=path.parent,
                            stdin=slave, stdout=slave, stderr=slave, env=env,
                            start_new_session=True)
    os.close(slave)
    received = [0]

    def drain():  # a terminal that reads everything the app writes
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:
                return
            if not data:
                return
            received[0] += len(data)

    threading.Thread(target=drain, daemon=True).start()
    return proc, master, received


def cpu_s(p: psutil.Process) -> float:
    t = p.cpu_times()
    return t.user + t.system


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return psutil.Process(pid).memory_info().rss / 2**20


def run_pids(root: Path) -> dict[str, int]:
    pids = {}
    ledger = root / ".itera" / "ledger.jsonl"
    for line in ledger.read_text().splitlines() if ledger.exists() else ():
        ev = json.loads(line)
        if ev.get("event") == "run_launched":
            pids[ev["run"]] = ev["pid"]
    return pids


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=None, help="CPU measurement window (60)")
    ap.add_argument("--records", type=int, default=None, help="backlog per run (1,000,000)")
    ap.add_argument("--rate", type=float, default=50.0, help="records/s per run after it")
    ap.add_argument("--size", default="160x48", help="terminal COLSxROWS (e.g. 80x24)")
    ap.add_argument("--quick", action="store_true", help="10 s window, 100,000 records backlog")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = ap.parse_args()
    args.seconds = args.seconds or (10.0 if args.quick else 60.0)
    args.records = args.records or (100_000 if args.quick else 1_000_000)
    out = sys.stdout
    if args.json:  # the readable lines go to stderr, the figures alone to stdout
        sys.stdout = sys.stderr
    cols, rows = (int(x) for x in args.size.lower().split("x"))
    with tempfile.TemporaryDirectory(prefix="app_bench_") as tmp:
        root = Path(tmp)
        path = write_campaign(root, args.records, args.rate)
        proc, master, received = start_app(path, cols, rows)
        app = psutil.Process(proc.pid)
        print(f"control room pid {proc.pid} in a {cols}x{rows} pty; 3 runs, backlog "
              f"{args.records:,} records each, then {args.rate:g} records/s each", flush=True)
        t_start = time.monotonic()
        try:
            deadline = time.monotonic() + 600
            while len(list((root / ".itera" / "runs").glob("*/backlog_done"))
                       if (root / ".itera" / "runs").exists() else []) < 3:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the app or the writers did not start (rc {proc.poll()})")
                time.sleep(0.5)
            print(f"backlogs written after {time.monotonic() - t_start:.1f} s; ingesting…",
                  flush=True)
            quiet, last = 0, cpu_s(app)
            while quiet < 3:
                time.sleep(1.0)
                now = cpu_s(app)
                quiet = quiet + 1 if (now - last) * 100 < 15 else 0
                last = now
                if time.monotonic() > deadline:
                    raise SystemExit("the app did not finish ingesting the backlog in time")
            ingest_s = time.monotonic() - t_start
            peak = peak_rss_mb(proc.pid)
            rss_now = app.memory_info().rss / 2**20
            print(f"backlog ingested {ingest_s:.1f} s after start; peak RSS {peak:.1f} MB "
                  f"(now {rss_now:.1f} MB)", flush=True)
            c0, w0, b0 = cpu_s(app), time.monotonic(), received[0]
            per = []
            while time.monotonic() - w0 < args.seconds:
                step = min(10.0, args.seconds - (time.monotonic() - w0))
                c1, t1 = cpu_s(app), time.monotonic()
                time.sleep(max(0.1, step))
                per.append(100 * (cpu_s(app) - c1) / (time.monotonic() - t1))
            wall = time.monotonic() - w0
            cpu_pct = 100 * (cpu_s(app) - c0) / wall
            out_kb_s = (received[0] - b0) / wall / 1024
            peak = peak_rss_mb(proc.pid)
            print(f"CPU over {wall:.0f} s watching 3 live runs: {cpu_pct:.2f} % of one core "
                  f"(per 10 s: {', '.join(f'{p:.1f}' for p in per)}); terminal output "
                  f"{out_kb_s:.2f} kB/s", flush=True)
            os.write(master, b"q")
            rc = proc.wait(timeout=30)
            pids = run_pids(root)
            alive = sum(1 for pid in pids.values() if psutil.pid_exists(pid))
            print(f"quit with q: exit {rc}; runs still alive after quit: {alive}/{len(pids)}")
        finally:
            if proc.poll() is None:
                proc.kill()
            for pid in run_pids(root).values():
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            os.close(master)
    cpu_ok, rss_ok = cpu_pct < CPU_GOAL_PCT, peak < RSS_GOAL_MB
    print(f"RESULT cpu {cpu_pct:.2f} % of one core (goal < {CPU_GOAL_PCT:g} %: "
          f"{'ok' if cpu_ok else 'MISSED'}); peak RSS {peak:.1f} MB after {args.records:,} "
          f"records per run (goal < {RSS_GOAL_MB:g} MB: {'ok' if rss_ok else 'MISSED'})")
    print(f"note: 3 runs at {args.rate:g} rec/s, {args.records:,} records backlog each, "
          f"{wall:.0f} s window, {cols}x{rows} pty")
    sys.stdout = out
    report([Figure("app CPU watching 3 live runs", cpu_pct, None, "% core", f"< {CPU_GOAL_PCT:g} % core",
                   cpu_ok),
            Figure(f"app peak RSS after {args.records:,} rec/run", peak, None, "MB", f"< {RSS_GOAL_MB:g} MB",
                   rss_ok)], args.json)
    return 0 if args.json or (cpu_ok and rss_ok) else 1


if __name__ == "__main__":
    sys.exit(main())
