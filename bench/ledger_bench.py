"""Ledger bench: what checksums and validation cost, side by side with bare JSON lines.

    python bench/ledger_bench.py [--lines 20000] [--appends 300] [--cpu-appends 3000] [--json]

Read: `read_ledger_report` (CRC-32 per line, schema per event, seq gaps) over a
ledger of N realistic events, against a bare `json.loads` loop over the same
bytes in the same run (what the reader did before checksums). Goal: at most
4x, and a three-day campaign's ledger opened in under a second (20k lines is
generous: ten runs checkpointing every 20 minutes for three days write ~7k).

Append: `Ledger.append` (encode, checksum, write-all, fsync) against a bare
`os.write` + `os.fsync` of a line of the same size, the medians of 21 short
rounds of each, alternating: fsync dominates both, so the goal is at most 1.3x.
That ratio moves with the disk's fsync; the CPU an append costs beside its fsync
does not: `time.process_time` over `--cpu-appends`
appends (event made, checked, encoded, checksummed, written) with `os.fsync`
made a no-op for the measurement, in microseconds per append. Goal: <= 50 us.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.figures import Figure, ratio_figure, report  # noqa: E402
from tui.engine.ledger.file import Ledger, encode_line, read_ledger_report  # noqa: E402
from tui.engine.ledger.events import RunLaunched

T0 = 1_764_500_000.0
ROUNDS = 21  # alternating append rounds, ours and bare


def realistic(seq: int) -> dict:
    """A mix like a real campaign's: warnings, checkpoints, verdicts, launches."""
    base = {"seq": seq, "t": T0 + seq, "run": f"wide-3f2a9c1b-{seq % 7}"}
    kind = seq % 4
    if kind == 0:
        return base | {"event": "warning", "message": f"GPU 0 idle for 10m while run {seq}"}
    if kind == 1:
        return base | {"event": "checkpoint_acknowledged", "path": f"ckpt/step-{seq}.pt",
                       "sha256": "ab" * 32, "bytes": 1_200_000_000, "write_s": 3.2,
                       "block_s": 0.4, "step": seq * 10, "mode": "async"}
    if kind == 2:
        return base | {"event": "checkpoint_verified", "path": f"ckpt/step-{seq}.pt",
                       "ok": True, "problem": None, "step": seq * 10}
    return base | {"event": "run_launched", "target": "wide", "kind": "run",
                   "category": "useful", "attempt": 1, "config_hash": "3f2a9c1b",
                   "config": {"argv": ["python", "train.py"], "params": {"lr": 3e-4}},
                   "pid": 4242, "pid_start": T0, "lanes": ["h100:0"], "devices": "0",
                   "lot": "h100", "max_steps": None}


def best_of(n: int, fn) -> float:
    times = []
    for _ in range(n):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def read_figures(lines: int, root: Path) -> list[Figure]:
    path = root / "ledger.jsonl"
    path.write_bytes(b"".join(encode_line(realistic(seq)) for seq in range(1, lines + 1)))
    report_ = read_ledger_report(path)
    assert len(report_.events) == lines and not report_.damage

    def bare():
        return [json.loads(raw) for raw in path.read_bytes().split(b"\n")[:-1]]

    ours, base = float("inf"), float("inf")
    for _ in range(3):  # interleaved, so both see the same load
        base = min(base, best_of(1, bare))
        ours = min(ours, best_of(1, lambda: read_ledger_report(path)))
    return [ratio_figure(f"ledger read, {lines:,} lines (vs bare json.loads)", ours, base,
                         "s", "<= 4x"),
            Figure(f"ledger open, {lines:,} lines", ours, None, "s", "< 1 s", ours < 1.0)]


def append_figures(appends: int, root: Path) -> list[Figure]:
    ledger = Ledger(root / "append.jsonl", clock=lambda: T0)
    sample = realistic(3)
    fields = {k: v for k, v in sample.items() if k not in ("seq", "t", "event")}
    line = encode_line(sample)

    def ours():
        for _ in range(appends):
            ledger.append(RunLaunched(**fields))

    def bare():
        for _ in range(appends):
            fd = os.open(root / "bare.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line)
                os.fsync(fd)
            finally:
                os.close(fd)

    # many short rounds, the two alternating, and the median of each: an fsync's time moves
    # with whatever else the disk does, and a best-of-5 of long rounds swung from 0.5x to
    # 1.5x on a busy box; the median of 21 paired rounds is what a typical append costs
    bases, mines = [], []
    for _ in range(ROUNDS):
        bases.append(best_of(1, bare) / appends)
        mines.append(best_of(1, ours) / appends)
    return [ratio_figure("ledger append (vs bare write + fsync)", statistics.median(mines),
                         statistics.median(bases), "s", "<= 1.3x")]


def append_cpu_figure(appends: int, root: Path) -> Figure:
    """CPU microseconds per append, its fsync excluded (the best of 5 rounds)."""
    ledger = Ledger(root / "cpu.jsonl", clock=lambda: T0)
    fields = {k: v for k, v in realistic(3).items() if k not in ("seq", "t", "event")}
    fsync, os.fsync = os.fsync, lambda fd: None
    try:
        per_append = float("inf")
        for _ in range(5):
            start = time.process_time()
            for _ in range(appends):
                ledger.append(RunLaunched(**fields))
            per_append = min(per_append, (time.process_time() - start) / appends * 1e6)
    finally:
        os.fsync = fsync
        ledger.close()
    return Figure("ledger append CPU, fsync excluded", per_append, None, "us", "<= 50 us",
                  per_append <= 50)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=20_000)
    parser.add_argument("--appends", type=int, default=100, help="appends per round")
    parser.add_argument("--cpu-appends", type=int, default=3000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        figures = (read_figures(args.lines, Path(tmp)) + append_figures(args.appends, Path(tmp))
                   + [append_cpu_figure(args.cpu_appends, Path(tmp))])
    report(figures, args.json)


if __name__ == "__main__":
    main()
