"""Flood bench: the engine's peak memory and NaN stop latency under a run printing flat out.

    python bench/flood_bench.py [--seconds 60] [--modes printed,jsonl] [--quick] [--json]
                                [--no-ending]

--quick: a 10 s flood. --json: the figures as one JSON list. --ending (the
default; --no-ending skips it): also a
flood whose run ends well (no NaN, exit 0), timed from the run's exit to the
headless engine's, and `itera-tui status` after it: judging a completed run
reads the readout the engine folded into the ledger, never its output again
(before: 25 s and 23-49 s after an 80 MB flood); goal <= 5 s each.

A real `itera-tui run --headless --no-wrapup` drives a one-run campaign whose
run writes as fast as one Python process can, for `--seconds`, first as
printed lines (`step K loss X ...` on stdout, read through `[metrics]`),
then as SDK JSONL records; then it writes one NaN loss and sleeps. The
engine must keep its rules on the newest records (it skips a backlog past
64 MB and says so in the ledger) in bounded memory.

Figures, each measured on the engine process itself:
- peak RSS (VmHWM from /proc, polled while it runs); goal <= 300 MB;
- stop latency: from the NaN's write (the run notes the time right after it)
  to the SIGTERM (the ledger's run_stop_requested), against the poll
  interval; goal <= 2x. The engine is caught up by then: it reads the newest
  chunk of a source at every poll whatever the backlog was.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.children import child_env  # noqa: E402
from bench.figures import Figure, ratio_figure, report  # noqa: E402
from tui.engine import read_ledger  # noqa: E402

RSS_GOAL_MB = 300.0
POLL = 0.25  # the headless engine's poll interval (tui.session.headless)

FLOOD = textwrap.dedent("""
    import json, os, sys, time
    mode, seconds = sys.argv[1], float(sys.argv[2])
    end, step = time.monotonic() + seconds, 0
    if mode == "printed":
        write = sys.stdout.write
        while time.monotonic() < end:
            for _ in range(1000):
                step += 1
                write(f"step {step} loss {1.0 / step:.6f} lr 3.0e-04 | some words of a log\\n")
        print(f"step {step + 1} loss nan", flush=True)
    else:
        out = open(os.environ["ITERA_METRICS"], "a")
        while time.monotonic() < end:
            for _ in range(1000):
                step += 1
                out.write(json.dumps({"t": time.time(), "step": step, "loss": 1.0 / step}) + "\\n")
        out.write(json.dumps({"t": time.time(), "step": step + 1, "loss": float("nan")}) + "\\n")
        out.flush()
    nan_t = time.time()
    with open(os.path.join(os.environ["ITERA_RUN_DIR"], "nan_written_at"), "w") as f:
        f.write(repr(nan_t))
    time.sleep(3600)
""")


# the same flood ending well: a last good record, exit 0 (the conclusion reads it)
ENDS_WELL = (FLOOD.replace('print(f"step {step + 1} loss nan", flush=True)',
                           'print(f"step {step + 1} loss 0.1", flush=True)')
             .replace('"loss": float("nan")', '"loss": 0.1')
             .replace("time.sleep(3600)", "sys.exit(0)"))
ENDING_GOAL_S = 5.0


def campaign(root: Path, mode: str, seconds: float, poll: float,
             ends_well: bool = False) -> Path:
    (root / "flood.py").write_text(ENDS_WELL if ends_well else FLOOD)
    (root / "campaign.toml").write_text(textwrap.dedent(f"""
        [campaign]
        name = "flood"
        question = "does the engine keep up"
        metric = "loss"  # what the flood reports (check refuses a metric no run can report)
        direction = "min"

        [[lot]]
        gpu = "cpu"
        hours = 1
        price_usd = 1.0

        [metrics]
        step = 'step (\\d+)'
        loss = 'loss (\\S+)'

        [[stop]]
        rule = "non_finite"

        [engine]
        grace_seconds = 2

        [[variant]]
        id = "flood"
        category = "mandatory"
        command = ["python", "flood.py", "{mode}", "{seconds}"]
        minutes = 5
    """))
    return root / "campaign.toml"


def vm_kb(pid: int, field: str) -> int | None:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def flood(mode: str, seconds: float, poll: float, wrapup: bool = False) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = campaign(Path(tmp), mode, seconds, poll)
        env = child_env()
        command = ["run", "--headless"] + ([] if wrapup else ["--no-wrapup"]) + [str(path)]
        engine = subprocess.Popen([sys.executable, "-m", "tui.cli", *command], cwd=tmp,
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        peak_kb = 0
        deadline = time.monotonic() + seconds * (30 if wrapup else 1) + 300
        while engine.poll() is None:
            if time.monotonic() > deadline:
                engine.kill()
                raise RuntimeError(f"the headless run did not end in time (peak RSS so far "
                                   f"{peak_kb / 1024:.0f} MB)")
            peak_kb = max(peak_kb, vm_kb(engine.pid, "VmHWM") or 0)
            time.sleep(0.1)
        stderr = engine.stderr.read().decode(errors="replace")
        ledger = read_ledger(Path(tmp) / ".itera" / "ledger.jsonl")
        run = next((e for e in ledger if e["event"] == "run_launched"), None)
        if run is None:  # refused by check, or never launched: say why instead of StopIteration
            raise RuntimeError(f"the campaign launched no run (engine exit {engine.returncode}: "
                               f"{stderr.strip()[-500:] or 'no stderr'})")
        run_dir = Path(tmp) / ".itera" / "runs" / run["run"]
        fired = [e for e in ledger if e["event"] == "stop_rule_fired"]
        sent = [e for e in ledger if e["event"] == "run_stop_requested"]
        if not fired or not sent or not (run_dir / "nan_written_at").exists():
            raise RuntimeError(f"the NaN did not stop the run (engine stderr: {stderr[-500:]})")
        nan_t = float((run_dir / "nan_written_at").read_text())
        written = sum((run_dir / n).stat().st_size for n in ("stdout.log", "metrics.jsonl")
                      if (run_dir / n).exists())
        skipped = max((e.get("skipped_bytes") or 0 for e in ledger
                       if e["event"] == "warning"), default=0)
        return {"peak_mb": peak_kb / 1024, "latency_s": max(0.0, sent[0]["t"] - nan_t),
                "written_mb": written / 1e6, "skipped_mb": skipped / 1e6,
                "rule": fired[0]["rule"]}


def ending(mode: str, seconds: float) -> dict:
    """A flood whose run exits 0: seconds from its exit to the headless engine's, then
    seconds `status` takes."""
    with tempfile.TemporaryDirectory() as tmp:
        path = campaign(Path(tmp), mode, seconds, POLL, ends_well=True)
        env = child_env()
        done = subprocess.run([sys.executable, "-m", "tui.cli", "run", "--headless",
                               "--no-wrapup", str(path)], cwd=tmp, env=env,
                              capture_output=True, timeout=seconds + 600)
        ended_t = time.time()
        ledger = read_ledger(Path(tmp) / ".itera" / "ledger.jsonl")
        exited = [e for e in ledger if e["event"] == "run_exited"]
        if not exited or exited[0].get("exit_code") != 0:
            raise RuntimeError(f"the run did not end well (rc {done.returncode}: "
                               f"{done.stderr.decode(errors='replace')[-300:]})")
        start = time.monotonic()
        subprocess.run([sys.executable, "-m", "tui.cli", "status", str(path)], cwd=tmp,
                       env=env, capture_output=True, timeout=600, check=True)
        return {"end_s": max(0.0, ended_t - exited[0]["t"]),
                "status_s": time.monotonic() - start}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=None, help="flood length (60)")
    parser.add_argument("--modes", default="printed,jsonl")
    parser.add_argument("--quick", action="store_true", help="a 10 s flood")
    parser.add_argument("--wrapup", action="store_true",
                        help="let the headless run go on to its wrap-up (the bundle reads "
                             "every record the run wrote)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--ending", action=argparse.BooleanOptionalAction, default=True,
                        help="also time the end and `status` after a flood that ends well "
                             "(on by default, so `python -m bench` measures it)")
    args = parser.parse_args()
    seconds = args.seconds or (10.0 if args.quick else 60.0)
    out = sys.stdout
    if args.json:  # the readable lines go to stderr, the figures alone to stdout
        sys.stdout = sys.stderr
    figures = []
    for mode in args.modes.split(","):
        got = flood(mode, seconds, POLL, args.wrapup)
        print(f"{mode} flood for {seconds:g} s: the run wrote {got['written_mb']:,.0f} MB, "
              f"the engine skipped at least {got['skipped_mb']:,.0f} MB of backlog (the last "
              f"amount it said); engine peak RSS "
              f"{got['peak_mb']:.0f} MB (goal <= {RSS_GOAL_MB:.0f}); NaN -> SIGTERM "
              f"{got['latency_s'] * 1000:.0f} ms = {got['latency_s'] / POLL:.2f}x the "
              f"{POLL:g} s poll interval (goal <= 2x)")
        figures += [
            Figure(f"{mode} flood {seconds:g} s: engine peak RSS", round(got["peak_mb"], 1),
                   None, "MB", f"<= {RSS_GOAL_MB:.0f} MB", got["peak_mb"] <= RSS_GOAL_MB),
            ratio_figure(f"{mode} flood {seconds:g} s: NaN stop latency vs poll",
                         got["latency_s"], POLL, "s", "<= 2x"),
        ]
        print(f"note: {mode} flood of {seconds:g} s wrote {got['written_mb']:,.0f} MB; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        if args.ending:
            end = ending(mode, seconds)
            print(f"{mode} flood for {seconds:g} s ending well: the headless engine exited "
                  f"{end['end_s']:.1f} s after the run; `status` took {end['status_s']:.1f} s")
            figures += [Figure(f"{mode} flood {seconds:g} s: run exit -> engine exit",
                               round(end["end_s"], 2), None, "s", f"<= {ENDING_GOAL_S:g} s",
                               end["end_s"] <= ENDING_GOAL_S),
                        Figure(f"{mode} flood {seconds:g} s: status after it",
                               round(end["status_s"], 2), None, "s", f"<= {ENDING_GOAL_S:g} s",
                               end["status_s"] <= ENDING_GOAL_S)]
    sys.stdout = out
    report(figures, args.json)


if __name__ == "__main__":
    main()
