"""Engine bench: stop latency and metrics ingest throughput, side by side.

    python bench/engine_bench.py [--runs 20] [--records 1000000] [--quick] [--json]

--quick: 6 runs, 200,000 records. --json: the figures as one JSON list.

Stop latency: 20 real runs each write a NaN loss record at a random moment;
the latency is the time from that record's write (its own "t") to the
SIGTERM the engine sends (the ledger's run_stop_requested "t"). Goal: under
two poll intervals.

Ingest: the engine's feed + live view + stop rules over a JSONL file of N
records, against a bare `json.loads` loop over the same file in the same run,
both in CPU time of this process, best of three interleaved runs (as
feed_bench.py: on a shared box other load moves wall time, not this; one wall
timing read 0.37x to 0.65x within minutes). Goal: at least half the bare
loop's rate.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.figures import ratio_figure, report  # noqa: E402
from tui.campaign import load_plan  # noqa: E402
from tui.campaign.plan import StopRule  # noqa: E402
from tui.engine import Engine, read_ledger  # noqa: E402
from tui.engine.watching.live import RunLive  # noqa: E402
from tui.engine.rules import RuleSet  # noqa: E402

NAN_SCRIPT = textwrap.dedent("""
    import json, os, random, time
    random.seed(os.environ["ITERA_RUN_ID"])
    out = open(os.environ["ITERA_METRICS"], "a")
    time.sleep(random.uniform(0.3, 1.2))
    for step in range(1, 10):
        out.write(json.dumps({"t": time.time(), "step": step, "loss": 1.0}) + "\\n"); out.flush()
        time.sleep(0.01)
    out.write(json.dumps({"t": time.time(), "step": 10, "loss": float("nan")}) + "\\n")
    out.flush()
    time.sleep(30)
""")


def variant_tables(count: int, argv: list[str], minutes: int) -> str:
    """`count` `[[variant]]` tables running `argv`, the first mandatory (the control)."""
    return "".join(f"""
[[variant]]
id = "v{i}"
category = "{'mandatory' if i == 0 else 'useful'}"
command = {json.dumps(argv)}
minutes = {minutes}
""" for i in range(count))


def nan_campaign(root: Path, runs: int, script: str = NAN_SCRIPT, extra: str = "") -> Path:
    """`runs` variants each running `script` (a NaN after a few records) under the
    `non_finite` rule, one lane each: the campaign the stop-latency benches share
    (`extra`: more TOML, e.g. the store bench's `[store]`)."""
    (root / "nan.py").write_text(script)
    variants = variant_tables(runs, [sys.executable, "nan.py"], 1)
    path = root / "campaign.toml"
    path.write_text(textwrap.dedent(f"""
        [campaign]
        name = "bench"
        question = "stop latency"
        [[lot]]
        gpu = "cpu"
        hours = 1
        price_usd = 1.0
        gpus = {min(runs, 10)}
        [[stop]]
        rule = "non_finite"
        [engine]
        grace_seconds = 2
    """) + variants + extra)
    return path


def stop_latency(runs: int, poll: float) -> list[float]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        engine = Engine(load_plan(nan_campaign(root, runs)), poll_interval=poll).open()
        try:
            while not engine.finished:
                engine.tick()
                time.sleep(poll)
        finally:
            engine.close()
        ledger = read_ledger(root / ".itera" / "ledger.jsonl")
        fired = {e["run"]: e["record_t"] for e in ledger if e["event"] == "stop_rule_fired"}
        sent = {e["run"]: e["t"] for e in ledger if e["event"] == "run_stop_requested"}
        return [sent[r] - fired[r] for r in fired if r in sent]


def ingest(records: int, repeat: int = 3) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        with open(run_dir / "metrics.jsonl", "w") as f:
            t = time.time()
            for step in range(records):
                f.write(json.dumps({"t": t + step * 0.01, "step": step, "loss": 1.0 / (step + 1),
                                    "val_acc": 0.5}) + "\n")
        rules = RuleSet((StopRule("non_finite", metrics=("loss",)),
                         StopRule("threshold", metric="val_acc", below=0.1)), "v", "run")
        best_ours = best_bare = 0.0
        for _ in range(repeat):  # interleaved, best of each: other load moves both alike
            start = time.process_time()
            with open(run_dir / "metrics.jsonl", "rb") as f:
                for line in f:
                    json.loads(line)
            best_bare = max(best_bare, records / (time.process_time() - start))
            live = RunLive("v", run_dir, rules, (), "val_acc", "max", time.time())
            start = time.process_time()
            while live.jsonl.records < records:
                live.poll(time.time())
            best_ours = max(best_ours, records / (time.process_time() - start))
        return best_ours, best_bare


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=None, help="runs for the stop latency (20)")
    parser.add_argument("--records", type=int, default=None, help="records to ingest (1,000,000)")
    parser.add_argument("--poll", type=float, default=0.25)
    parser.add_argument("--quick", action="store_true", help="6 runs, 200,000 records")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    runs = args.runs or (6 if args.quick else 20)
    records = args.records or (200_000 if args.quick else 1_000_000)
    out = sys.stdout
    if args.json:  # the readable lines go to stderr, the figures alone to stdout
        sys.stdout = sys.stderr
    lat = stop_latency(runs, args.poll)
    print(f"stop latency over {len(lat)} runs (NaN record written -> SIGTERM sent), "
          f"poll interval {args.poll:.2f} s:")
    print(f"  median {statistics.median(lat) * 1000:.0f} ms, worst {max(lat) * 1000:.0f} ms "
          f"= {statistics.median(lat) / args.poll:.2f}x / {max(lat) / args.poll:.2f}x the poll "
          f"interval (goal: under 2x)")
    ours, bare = ingest(records)
    print(f"ingest of {records:,} records: engine feed+rules {ours:,.0f} rec/s, "
          f"bare json.loads {bare:,.0f} rec/s = {ours / bare:.2f}x (goal: >= 0.5x)")
    print(f"note: stop latency over {len(lat)} runs, ingest of {records:,} records")
    sys.stdout = out
    report([
        ratio_figure("stop latency vs poll interval, median", statistics.median(lat), args.poll, "s", "< 2x"),
        ratio_figure(f"stop latency vs poll interval, worst of {len(lat)}", max(lat), args.poll, "s", "< 2x"),
        ratio_figure("ingest (feed+rules) vs bare json.loads", ours, bare, "rec/s", ">= 0.5x"),
    ], args.json)


if __name__ == "__main__":
    main()
