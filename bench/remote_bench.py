"""Remote bench: stop latency of a rule on the second box, beside the same on this box.

    python bench/remote_bench.py [--runs 6] [--quick] [--json]

A real sshd on 127.0.0.1 (tests/sshkit.py, so openssh-server and rsync must be
installed: `.ci/run` does) is the second box. Its lot holds the runs, each of which
writes a NaN loss record at a random moment; the first box starts that box's
engine through ssh (`tui.remote.start.start_box`) and the rule runs THERE, so the
latency (the NaN record's own "t" to the SIGTERM in that box's ledger) must be the
same as on one box, measured side by side with bench/engine_bench.py's local run.
Goals: under two poll intervals, as engine_bench's; the median within 1.5x of the
local median.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.engine_bench import NAN_SCRIPT, stop_latency  # noqa: E402
from bench.figures import ratio_figure, report  # noqa: E402


def remote_stop_latency(runs: int) -> list[float]:
    from boxkit import end_processes_under, far_root
    from sshkit import Sshd
    from tui.campaign import load_plan
    from tui.campaign.boxes import box_shares
    from tui.engine import read_ledger
    from tui.remote.start import start_box

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sshd = Sshd(root / "sshd")
        first = root / "first"
        first.mkdir()
        (first / "nan.py").write_text(NAN_SCRIPT)
        variants = "".join(f"""
[[variant]]
id = "v{i}"
category = "{'mandatory' if i == 0 else 'useful'}"
command = ["python", "nan.py"]
minutes = 1
""" for i in range(runs + 1))
        (first / "campaign.toml").write_text(textwrap.dedent(f"""
            [campaign]
            name = "bench"
            question = "stop latency on another box"
            metric = "loss"  # what nan.py reports (check refuses a metric no run can report)
            [[lot]]
            id = "a"
            gpu = "cpu"
            hours = 1
            price_usd = 1.0
            [[lot]]
            id = "b"
            gpu = "cpu"
            hours = 1
            price_usd = 1.0
            gpus = {runs}
            host = "box2"
            dir = "camp"
            [[stop]]
            rule = "non_finite"
            [engine]
            grace_seconds = 2
        """) + variants)
        plan = load_plan(first / "campaign.toml")
        share = box_shares(plan)[1]
        far = far_root(sshd)
        try:
            sshd.start()
            started = start_box(plan, share, sshd.settings())
            if not started.ok:
                raise SystemExit(f"the second box did not start: {started.line}")
            ledger = far / ".itera" / "ledger.jsonl"
            deadline = time.monotonic() + 180
            while time.monotonic() < deadline:
                events = read_ledger(ledger) if ledger.exists() else []
                sent = {e["run"]: e["t"] for e in events if e["event"] == "run_stop_requested"}
                if len(sent) >= len(share.variants):
                    break
                time.sleep(0.5)
            fired = {e["run"]: e["record_t"] for e in events if e["event"] == "stop_rule_fired"}
            return [sent[r] - fired[r] for r in fired if r in sent]
        finally:
            end_processes_under(far)
            sshd.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=None, help="runs on the second box (6)")
    parser.add_argument("--quick", action="store_true", help="4 runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    runs = args.runs or (4 if args.quick else 6)
    out = sys.stdout
    if args.json:
        sys.stdout = sys.stderr
    far = remote_stop_latency(runs)
    here = stop_latency(runs, 0.25)
    print(f"stop latency (NaN record written -> SIGTERM sent), {len(far)} runs on the second "
          f"box through ssh: median {statistics.median(far) * 1000:.0f} ms, worst "
          f"{max(far) * 1000:.0f} ms; {len(here)} runs on this box: median "
          f"{statistics.median(here) * 1000:.0f} ms, worst {max(here) * 1000:.0f} ms")
    print(f"note: {len(far)} runs on the second box (sshd on 127.0.0.1), poll 0.25 s on both")
    sys.stdout = out
    report([ratio_figure("stop latency on box 2 vs poll interval, median",
                         statistics.median(far), 0.25, "s", "< 2x"),
            ratio_figure(f"stop latency on box 2 vs poll interval, worst of {len(far)}",
                         max(far), 0.25, "s", "< 2x"),
            ratio_figure("stop latency on box 2 vs this box, median", statistics.median(far),
                         statistics.median(here), "s", "<= 1.5x")], args.json)


if __name__ == "__main__":
    main()
