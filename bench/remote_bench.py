"""Remote bench: stop latency of a rule on the second box, beside the same on this box.

    python bench/remote_bench.py [--runs 6] [--quick] [--json]

A real sshd on 127.0.0.1 (tests/sshkit.py, so openssh-server and rsync must be
installed: `.ci/run` does) is the second box. Its lot holds the runs, each of which
writes a NaN loss record at a random moment; the first box starts that box's
engine through ssh (`tui.remote.start.start_box`) and the rule runs THERE, so the
latency (the NaN record's own "t" to the SIGTERM in that box's ledger) must be the
same as on one box, measured side by side with the same detached engine started
on this box (`itera-tui engine start`): both pass every `ENGINE_POLL_S` (0.5 s),
so the ratio is what box 2 and ssh add. (Until round 5 the side was the
in-process engine of bench/engine_bench.py at 0.25 s, half the detached engine's
pass: the 1.77x it printed was that, not ssh.) Goals: under two poll intervals,
as engine_bench's; the median within 1.5x of this box's median.

Following (issue 35.15): the first box's CPU while its room follows two boxes (this
box's engine and the second box's, through ssh), each with 3 runs writing 50
records/s, against the same room following this box alone: the CPU of the
following process and its ssh client over the same window, both engines driving
the whole time (the engines' own CPU is not the room's). Goal: <= 1.5x; and that
CPU as a share of one core, < 3 % (the room's goal in app_bench.py): both sides are
tens of milliseconds in the window, so their ratio moves with what happened to
arrive in it, while the share says what following a second box costs.

    python bench/remote_bench.py --follow-only [--window 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from bench.engine_bench import NAN_SCRIPT, variant_tables  # noqa: E402
from tui.service.daemon import ENGINE_POLL_S  # noqa: E402
from bench.figures import ROOM_CPU_GOAL_PCT, Figure, ratio_figure, report  # noqa: E402


def nan_plan(runs: int, far: bool) -> str:
    """The campaign both figures run: `runs` NaN runs on a lot of this box or box 2."""
    lot_b = textwrap.dedent(f"""
        [[lot]]
        id = "b"
        gpu = "cpu"
        hours = 1
        price_usd = 1.0
        gpus = {runs}
        host = "box2"
        dir = "camp"
    """) if far else ""
    return textwrap.dedent(f"""
        [campaign]
        name = "bench"
        question = "stop latency on another box"
        metric = "loss"  # what nan.py reports (check refuses a metric no run can report)
        [[lot]]
        id = "a"
        gpu = "cpu"
        hours = 1
        price_usd = 1.0
        gpus = {1 if far else runs + 1}
    """) + lot_b + textwrap.dedent("""
        [[stop]]
        rule = "non_finite"
        [engine]
        grace_seconds = 2
    """) + variant_tables(runs + 1, ["python", "nan.py"], 1)


def latencies(ledger: Path, expected: int, timeout: float = 180) -> list[float]:
    """NaN record written -> SIGTERM sent, per run, from a detached engine's ledger."""
    from tui.engine import read_ledger

    deadline = time.monotonic() + timeout
    events: list = []
    while time.monotonic() < deadline:
        events = read_ledger(ledger) if ledger.exists() else []
        sent = {e["run"]: e["t"] for e in events if e["event"] == "run_stop_requested"}
        if len(sent) >= expected:
            break
        time.sleep(0.5)
    fired = {e["run"]: e["record_t"] for e in events if e["event"] == "stop_rule_fired"}
    sent = {e["run"]: e["t"] for e in events if e["event"] == "run_stop_requested"}
    return [sent[r] - fired[r] for r in fired if r in sent]


def remote_stop_latency(runs: int) -> list[float]:
    """The detached engine on box 2 (started through ssh): what the rule there took."""
    from boxkit import end_processes_under, far_root
    from sshkit import Sshd
    from tui.campaign import load_plan
    from tui.campaign.boxes import box_shares
    from tui.remote.start import start_box

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sshd = Sshd(root / "sshd")
        first = root / "first"
        first.mkdir()
        (first / "nan.py").write_text(NAN_SCRIPT)
        (first / "campaign.toml").write_text(nan_plan(runs, far=True))
        plan = load_plan(first / "campaign.toml")
        share = box_shares(plan)[1]
        far = far_root(sshd)
        try:
            sshd.start()
            started = start_box(plan, share, sshd.settings())
            if not started.ok:
                raise SystemExit(f"the second box did not start: {started.line}")
            return latencies(far / ".itera" / "ledger.jsonl", len(share.variants))
        finally:
            end_processes_under(far)
            sshd.stop()


def local_stop_latency(runs: int) -> list[float]:
    """The same detached engine (`itera-tui engine start`) on this box: the side by side
    that shows what box 2 and ssh add, poll interval for poll interval."""
    import subprocess

    from boxkit import end_processes_under

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "nan.py").write_text(NAN_SCRIPT)
        (root / "campaign.toml").write_text(nan_plan(runs, far=False))
        try:
            env = dict(os.environ, PYTHONPATH=str(ROOT))
            subprocess.run([sys.executable, "-m", "tui.cli", "engine", "start",
                            str(root / "campaign.toml")], cwd=root, env=env, check=True,
                           capture_output=True, timeout=120)
            return latencies(root / ".itera" / "ledger.jsonl", runs + 1)
        finally:
            end_processes_under(root)


RECORDS_SCRIPT = textwrap.dedent("""
    import json, os, time
    out = open(os.environ["ITERA_METRICS"], "a")
    step = 0
    while step < 200000:
        step += 1
        out.write(json.dumps({"t": time.time(), "step": step, "loss": 1.0 / step}) + "\\n")
        out.flush()
        time.sleep(0.02)  # 50 records/s
""")


def _cpu_of(procs) -> float:
    total = 0.0
    for proc in procs:
        try:
            times = proc.cpu_times()
            total += times.user + times.system
        except Exception:  # a process that ended: its time is gone with it
            continue
    return total


def _following_cpu(source, window_s: float, every_s: float = 0.25) -> float:
    """CPU seconds of this process and its children (the ssh bridges) while `source` is
    stepped as the room's pump would, for `window_s`. This process's own time is
    `time.process_time` (every thread, to the nanosecond): /proc's counters tick every
    10 ms, and following for 10 s costs a few ticks, so a ratio of tick counts read
    0.02 s against 0.04 s as 2.00x. The children are counted from /proc (ticks)."""
    import psutil

    me = psutil.Process()
    children = me.children(recursive=True)
    before = time.process_time(), _cpu_of(children)
    deadline = time.monotonic() + window_s
    while time.monotonic() < deadline:
        source.step()
        time.sleep(every_s)
    bridges = _cpu_of(children) - before[1]
    _split.append(bridges)  # the ssh bridges' share, for the note
    return time.process_time() - before[0] + bridges


_split: list[float] = []


def follow_cpu(window_s: float, runs_per_box: int = 3) -> tuple[float, float, str]:
    """(CPU following both boxes, CPU following this box alone, a note)."""
    import os

    from boxkit import end_processes_under, far_root
    from servicekit import end_engine
    from sshkit import Sshd
    from tui.campaign import load_plan
    from tui.campaign.boxes import box_shares
    from tui.service.fleet import open_fleet
    from tui.service.starter import connect

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        sshd = Sshd(root / "sshd")
        first = root / "first"
        first.mkdir()
        (first / "records.py").write_text(RECORDS_SCRIPT)
        n = 2 * runs_per_box
        variants = variant_tables(n, ["python", "records.py"], 60)
        (first / "campaign.toml").write_text(textwrap.dedent(f"""
            [campaign]
            name = "follow"
            question = "the room's CPU following two boxes"
            metric = "loss"
            [[lot]]
            id = "a"
            gpu = "cpu"
            hours = 2
            price_usd = 1.0
            gpus = {runs_per_box}
            [[lot]]
            id = "b"
            gpu = "cpu"
            hours = 2
            price_usd = 1.0
            gpus = {runs_per_box}
            host = "box2"
            dir = "camp"
            [engine]
            grace_seconds = 2
        """) + variants)
        plan = load_plan(first / "campaign.toml")
        shares = box_shares(plan)
        far = far_root(sshd)
        saved = {k: os.environ.get(k) for k in (*sshd.client_env, "ITERA_REMOTE_COMMAND")}
        os.environ.update(sshd.client_env)
        os.environ["ITERA_REMOTE_COMMAND"] = f"{sys.executable} -m tui.cli"
        fleet = alone = None
        try:
            sshd.start()
            fleet = open_fleet(plan, connect(plan, start=True, name="room"))
            deadline = time.monotonic() + 240
            running = 0
            while time.monotonic() < deadline:
                running = len(fleet.step().state.running)
                if running >= n and not fleet.others["box2"].link.lost:
                    break
                time.sleep(0.5)
            else:
                raise SystemExit(f"not every run started: {running} of {n}")
            time.sleep(3.0)  # the first whole snapshots of both boxes are in
            both = _following_cpu(fleet, window_s)
            fleet.close()
            fleet = None
            alone = connect(plan, start=False, name="room")
            alone.step()
            one = _following_cpu(alone, window_s)
            note = (f"note: {n} runs x 50 records/s, "
                    + ", ".join(f"{s.box}: {len(s.variants)} runs" for s in shares)
                    + f"; window {window_s:g} s each; ssh bridges {_split[0]:.2f} CPU s of "
                    f"the 2-box figure; load {os.getloadavg()[0]:.2f}")
            return both, one, note
        finally:
            for client in (fleet, alone):
                if client is not None:
                    client.close()
            end_engine(first)
            end_processes_under(far)
            sshd.stop()
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=None, help="runs on the second box (6)")
    parser.add_argument("--quick", action="store_true", help="4 runs")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--follow-only", action="store_true",
                        help="only the room's CPU following two boxes against one")
    parser.add_argument("--window", type=float, default=None, help="seconds measured (20)")
    args = parser.parse_args()
    window = args.window or (10.0 if args.quick else 20.0)
    runs = args.runs or (4 if args.quick else 6)
    out = sys.stdout
    if args.json:
        sys.stdout = sys.stderr
    both, one, note = follow_cpu(window)
    print(f"the first box following 2 boxes: {both:.3f} CPU s in {window:g} s; following "
          f"this box alone: {one:.3f} CPU s")
    print(note, file=sys.stderr)
    # both sides are tens of ms in the window, so the ratio moves with what arrived in it
    # (1.1x to 4.7x in six quiet runs); the share of a core says what a person pays
    share = 100 * both / window
    following = [ratio_figure("first box CPU following 2 boxes vs 1 box", both, one, "s",
                              "<= 1.5x"),
                 Figure("first box CPU following 2 boxes, share of a core", share, None,
                        "% core", f"< {ROOM_CPU_GOAL_PCT:g} % core", share < ROOM_CPU_GOAL_PCT)]
    if args.follow_only:
        sys.stdout = out
        report(following, args.json)
        return
    far = remote_stop_latency(runs)
    here = local_stop_latency(runs)
    print(f"stop latency (NaN record written -> SIGTERM sent), {len(far)} runs on the second "
          f"box through ssh: median {statistics.median(far) * 1000:.0f} ms, worst "
          f"{max(far) * 1000:.0f} ms; {len(here)} runs on this box: median "
          f"{statistics.median(here) * 1000:.0f} ms, worst {max(here) * 1000:.0f} ms")
    print(f"note: {len(far)} runs on the second box (sshd on 127.0.0.1), the detached engine "
          f"on both boxes (its pass every {ENGINE_POLL_S:g} s)")
    sys.stdout = out
    report([ratio_figure("stop latency on box 2 vs poll interval, median",
                         statistics.median(far), ENGINE_POLL_S, "s", "< 2x"),
            ratio_figure(f"stop latency on box 2 vs poll interval, worst of {len(far)}",
                         max(far), ENGINE_POLL_S, "s", "< 2x"),
            ratio_figure("stop latency on box 2 vs this box, median", statistics.median(far),
                         statistics.median(here), "s", "<= 1.5x"), *following], args.json)


if __name__ == "__main__":
    main()
