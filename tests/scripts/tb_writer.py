"""Writes TensorBoard scalars with torch's SummaryWriter, as a training loop would.

Usage: tb_writer.py LOGDIR [--steps N] [--nan-at K] [--sleep S] [--wait-for PATH]
Every step logs `train/loss` and, every 5 steps, `val/acc`; from step K on the
loss is NaN. Each step is flushed, so a reader can follow the file as it
grows. With --wait-for, the script waits (up to 30 s) for PATH to exist after
its first step, so a test can read a half-written run before the rest comes.
"""

import argparse
import os
import time

from torch.utils.tensorboard import SummaryWriter

p = argparse.ArgumentParser()
p.add_argument("logdir")
p.add_argument("--steps", type=int, default=30)
p.add_argument("--nan-at", type=int, default=None)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--wait-for", default=None)
args = p.parse_args()

writer = SummaryWriter(args.logdir)
for step in range(1, args.steps + 1):
    loss = float("nan") if args.nan_at is not None and step >= args.nan_at else 1.0 / step
    writer.add_scalar("train/loss", loss, step)
    if step % 5 == 0:
        writer.add_scalar("val/acc", 0.5 + step / (4 * args.steps), step)
    writer.flush()
    if step == 1 and args.wait_for:
        deadline = time.time() + 30
        while not os.path.exists(args.wait_for) and time.time() < deadline:
            time.sleep(0.02)
    time.sleep(args.sleep)
writer.close()
