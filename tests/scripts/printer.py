"""A training stand-in that only prints, for engine process tests.

Usage: printer.py [--steps N] [--nan-at K] [--truncated N] [--acc-drop-at K]
                  [--ignore-sigterm] [--stall-at K] [--sleep S] [--jsonl]
                  [--explode-at K]
It prints `step K loss X acc Y` lines (or SDK-style JSONL when --jsonl) so the
engine's regex feed and rules see exactly what a real script would print.
--explode-at K: from step K the loss grows tenfold a step up to 1e8 and stays there,
finite (too high a learning rate), so only a `diverged` rule can stop it.
"""

import argparse
import json
import os
import signal
import sys
import time
from dataclasses import dataclass


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--nan-at", type=int, default=None)
    p.add_argument("--nan-spelling", default="nan")
    p.add_argument("--truncated", type=int, default=None)
    p.add_argument("--acc-drop-at", type=int, default=None)
    p.add_argument("--ignore-sigterm", action="store_true")
    p.add_argument("--stall-at", type=int, default=None)
    p.add_argument("--explode-at", type=int, default=None)
    p.add_argument("--sleep", type=float, default=0.02)
    p.add_argument("--jsonl", action="store_true")
    p.add_argument("--write", default=None, help="deliverable file to write at the end")
    return p


@dataclass(frozen=True)
class Step:
    """One step as the script reports it; `stall`: it hangs before reporting it."""
    step: int
    loss: float
    acc: float
    stall: bool = False

    def printed(self, nan_spelling: str) -> str:
        shown = nan_spelling if self.loss != self.loss else f"{self.loss:.5f}"
        return f"step {self.step} loss: {shown} acc={self.acc:.4f}"

    def record(self, t: float) -> dict:
        return {"t": t, "step": self.step, "loss": self.loss, "acc": self.acc}


def steps(args, max_steps: int):
    """What the script reports, step by step (tests/fakeprocs.py plays the same)."""
    for step in range(1, max_steps + 1):
        loss = 1.0 / step
        acc = 0.5 + step / (2 * max_steps)
        if args.nan_at is not None and step >= args.nan_at:
            loss = float("nan")
        if args.explode_at is not None and step >= args.explode_at:
            loss = min(1e8, 10.0 ** (step - args.explode_at + 1))
        if args.acc_drop_at is not None and step >= args.acc_drop_at:
            acc = 0.1
        yield Step(step, loss, acc, stall=args.stall_at is not None and step == args.stall_at)


def main() -> None:
    args = parser().parse_args()
    if args.ignore_sigterm:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    max_steps = int(os.environ.get("ITERA_MAX_STEPS") or args.steps)
    metrics = os.environ.get("ITERA_METRICS")
    out = open(metrics, "a") if (args.jsonl and metrics) else None
    if args.truncated is not None:
        print(f"truncated={args.truncated}", flush=True)
    for step in steps(args, max_steps):
        if step.stall:
            time.sleep(3600)
        if out:
            out.write(json.dumps(step.record(time.time())) + "\n")
            out.flush()
        else:
            print(step.printed(args.nan_spelling), flush=True)
        time.sleep(args.sleep)
    if args.write:
        with open(os.path.join(os.environ.get("ITERA_RUN_DIR", "."), args.write), "w") as f:
            f.write("done\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
