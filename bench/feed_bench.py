"""Feed bench: ingest rate of printed streams, against a bare loop, side by side.

    python bench/feed_bench.py [--segments 200000] [--repeat 5] [--json]

Two streams real training code prints, written once into a run directory:
- a `\\r`-heavy tqdm bar (Lightning's format: one line, a `\\r` before every
  update, a `\\n` only at the end of each epoch);
- ANSI-coloured log lines (`step`, `loss` and `lr` each wrapped in colour codes).

"ours" is the engine's whole path: `RunLive.poll` (chunked tail of stdout.log
and stderr.log, ANSI removal, `\\r`/`\\n` segments, last match of every
pattern, number parsing, the global step clock, the live view's histories and
a `non_finite` rule on every record). "bare" is a loop over the same bytes in
the same run that decodes them, removes ANSI codes (on the coloured stream
only, with the same regex), splits on `\\r`/`\\n` and runs `search` of the same
compiled patterns on every segment, keeping nothing. Both are timed in CPU
time of this process (other load on the box moves wall time, not this), best
of `--repeat` interleaved runs. Goal: at least 0.5x.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.figures import ratio_figure, report  # noqa: E402
from tui.campaign.plan import MetricPattern, StopRule  # noqa: E402
from tui.campaign.presets import build_spec  # noqa: E402
from tui.engine.watching.live import RunLive  # noqa: E402
from tui.engine.rules import RuleSet  # noqa: E402
from tui.engine.reading.segments import ANSI  # noqa: E402

TQDM_PATTERNS = (("step", r"\|\s*(\d+)/\d+ \["), ("loss", r"train_loss=([^,\]]+)"))
ANSI_PATTERNS = (("step", r"step (\d+)"), ("loss", r"loss (\S+)"), ("lr", r"lr (\S+)"))


def tqdm_stream(segments: int, per_epoch: int = 1000) -> bytes:
    out = []
    for i in range(segments):
        epoch, n = divmod(i, per_epoch)
        bar = "█" * (n * 10 // per_epoch)
        out.append(f"\rEpoch {epoch}: {n * 100 // per_epoch:3d}%|{bar:<10}| {n + 1}/{per_epoch} "
                   f"[00:15<00:18, 30.21it/s, v_num=0, train_loss={1.0 / (i + 1):.3f}]")
        if n == per_epoch - 1:
            out.append("\n")
    return "".join(out).encode()


def ansi_stream(segments: int) -> bytes:
    return "".join(
        f"\x1b[1m\x1b[32mstep\x1b[0m {i} | loss \x1b[31m{1.0 / (i + 1):.4f}\x1b[0m | "
        f"lr \x1b[33m{3e-4:.1e}\x1b[0m | {i * 0.01:.2f}s\n" for i in range(segments)).encode()


def bare(data: bytes, patterns, ansi: bool) -> int:
    compiled = [re.compile(p) for _, p in patterns]
    text = data.decode("utf-8", "replace")
    if ansi:
        text = ANSI.sub("", text)
    n = 0
    for segment in re.split(r"[\r\n]", text):
        for rx in compiled:
            if rx.search(segment):
                n += 1
    return n


def ours(run_dir: Path, patterns) -> int:
    spec = build_spec(None, tuple(MetricPattern(name, p) for name, p in patterns))
    rules = RuleSet((StopRule("non_finite", metrics=("loss",)),), "v", "run")
    live = RunLive("v", run_dir, rules, spec, "acc", "max", 0.0)
    while live.poll(1.0) is None and live.feeds.pending():
        pass
    while live.feeds.pending():
        live.poll(1.0)
    return live.view().records


def measure(data: bytes, patterns, ansi: bool, repeat: int) -> tuple[float, float, int]:
    """(our MB/s, bare MB/s, records): best of `repeat`, the two interleaved, CPU time."""
    mb = len(data) / 1e6
    best_ours = best_bare = 0.0
    records = 0
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        (run_dir / "stdout.log").write_bytes(data)
        for _ in range(repeat):
            start = time.process_time()
            bare(data, patterns, ansi)
            best_bare = max(best_bare, mb / (time.process_time() - start))
            start = time.process_time()
            records = ours(run_dir, patterns)
            best_ours = max(best_ours, mb / (time.process_time() - start))
    return best_ours, best_bare, records


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--segments", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    figures = []
    for name, data, patterns, ansi in (
            ("tqdm \\r bar", tqdm_stream(args.segments), TQDM_PATTERNS, False),
            ("ANSI-coloured lines", ansi_stream(args.segments), ANSI_PATTERNS, True)):
        mine, base, records = measure(data, patterns, ansi, args.repeat)
        if records != args.segments:
            raise SystemExit(f"{name}: read {records} records of {args.segments}")
        figures.append(ratio_figure(f"feed ingest, {name} ({len(data) / 1e6:.0f} MB)", mine,
                                    base, "MB/s", ">= 0.5x"))
    report(figures, args.json)


if __name__ == "__main__":
    main()
