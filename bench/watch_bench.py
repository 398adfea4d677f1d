"""Does watching a big user-written checkpoint stall the engine's tick?

    python bench/watch_bench.py [--mb 512] [--rounds 3] [--dir DIR] [--json]

The engine polls a CheckpointWatcher every tick; a 10 GB checkpoint must not
freeze stop rules while it is hashed. Side by side in one run, on the same
file (warm page cache):

- baseline: copying the file into the held folder and hashing the copy inline
  (`tui.campaign.held.copy_held`: what holding one save of a file takes, done in a
  tick by a naive watcher; a reflink where the filesystem has them, else a copy);
- the longest single `poll()` while the watcher hashes it (goal <= 0.05x the
  inline hash: the tick stays responsive);
- the time from the first poll to the acknowledgement (goal <= 1.5x: hashing
  off the thread costs little throughput).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.figures import ratio_figure, report  # noqa: E402
from tui.campaign.held import copy_held, release  # noqa: E402
from tui.engine.checkpoints.watched import CheckpointWatcher  # noqa: E402


def write_file(path: Path, megabytes: int) -> None:
    block = os.urandom(1 << 20)
    with open(path, "wb") as f:
        for _ in range(megabytes):
            f.write(block)


def one_round(folder: Path, name: str) -> tuple[float, float, float]:
    started = time.perf_counter()
    copy = copy_held(folder, name, "bench-inline")
    inline = time.perf_counter() - started
    release(folder, copy.path)

    watcher = CheckpointWatcher(folder, [name], settle_s=0, scan_every_s=0)
    longest, acks, started = 0.0, [], time.perf_counter()
    while not acks:
        tick = time.perf_counter()
        acks = watcher.poll(time.time(), writer_gone=True)
        longest = max(longest, time.perf_counter() - tick)
        if not acks:
            time.sleep(0.01)  # the engine's loop sleeps between ticks too
    to_ack = time.perf_counter() - started
    release(folder, acks[0]["held"])
    return inline, longest, to_ack


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mb", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        write_file(folder / "model.ckpt", args.mb)
        rounds = [one_round(folder, "model.ckpt") for _ in range(args.rounds)]
    inline = statistics.median(r[0] for r in rounds)
    longest = statistics.median(r[1] for r in rounds)
    to_ack = statistics.median(r[2] for r in rounds)
    report([
        ratio_figure(f"watch {args.mb} MB: longest poll while hashing", longest, inline, "s",
                     "<= 0.05x"),
        ratio_figure(f"watch {args.mb} MB: first poll to ack", to_ack, inline, "s", "<= 1.5x"),
    ], args.json)


if __name__ == "__main__":
    main()
