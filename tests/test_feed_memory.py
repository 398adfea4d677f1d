import pytest
"""A 50 MB line without a newline must not grow the engine's memory.

The feeding process is a fresh interpreter (its peak RSS, VmHWM, is its own): it
builds the engine's `RunLive` on a run directory and polls while 50 MB of a
progress "line" with no terminator is appended to stdout.log and 50 MB of one
JSONL line to metrics.jsonl, then the terminators and a last value arrive.
Documented bound (README, `[metrics]`): a run's feeds hold at most 64 KiB of
an unfinished printed segment and read 256 KiB (printed) / 1 MiB (JSONL) at
a time, so the peak grows by a few MB; the test allows 16 MB. The old feed
kept the whole unfinished line and re-joined it every poll (> 100 MB).
"""

import json
import subprocess
import sys
import textwrap

from conftest import REPO

BOUND_MB = 16

FEEDER = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from tui.campaign.plan import StopRule
    from tui.engine.watching.live import RunLive
    from tui.engine.rules import RuleSet

    run_dir = Path(sys.argv[1])
    rules = RuleSet((StopRule("non_finite", metrics=("loss",)),), "v", "run")
    live = RunLive("v", run_dir, rules, (("loss", r"loss (\\S+)"),), "acc", "max", 0.0)
    live.feeds.shed_backlog_past(None)  # read every byte, as readers after the fact do:
    # the overlong-line bounds are what is measured (skipping a flood: test_feed_backlog)
    live.poll(0.0)
    piece = b"\\x1b[32mloss 9.99\\x1b[0m "
    chunk = piece * ((1 << 20) // len(piece))  # about 1 MiB, whole escapes only
    def status_kb(field):  # VmRSS: now; VmHWM: this process's peak (ru_maxrss would
        status = Path("/proc/self/status").read_text()  # include the forking parent's)
        return int(status.split(field + ":")[1].split()[0])
    baseline = status_kb("VmRSS")
    with open(run_dir / "stdout.log", "ab") as out, open(run_dir / "metrics.jsonl", "ab") as js:
        js.write(b'{"x": "')
        for _ in range(52):  # > 50 MB
            out.write(chunk); out.flush()
            js.write(b"y" * (1 << 20)); js.flush()
            live.poll(1.0)
        before_end = live.view().records
        out.write(b" loss 0.25\\n"); js.write(b'"}\\n{"step": 7, "loss": 0.5}\\n')
    stop = None
    for _ in range(100):
        fired = live.poll(2.0)
        stop = stop or fired
    peak = status_kb("VmHWM")
    view = live.view()
    print(json.dumps({"baseline_kb": baseline, "peak_kb": peak, "before_end": before_end,
                      "records": view.records, "bad": view.bad_lines,
                      "values": {k: v for k, v in view.last_values.items() if k != "x"},
                      "stop": stop is not None}))
""")


@pytest.mark.slow
def test_a_50_mb_line_without_newline_stays_under_the_bound_and_its_tail_is_read(tmp_path):
    out = subprocess.run([sys.executable, "-c", FEEDER, str(tmp_path)], cwd=REPO,
                         capture_output=True, text=True, timeout=120,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    grown_mb = (result["peak_kb"] - result["baseline_kb"]) / 1024
    assert grown_mb < BOUND_MB, result
    assert result["before_end"] == 0  # nothing is parsed before the segment ends
    assert result["records"] == 2 and result["bad"] == 1  # the tail + the next JSONL record
    assert result["values"]["loss"] == 0.25 and result["stop"] is False  # the tail's last
    print(f"peak grew {grown_mb:.1f} MB (bound {BOUND_MB} MB)")
