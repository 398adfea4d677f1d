"""A torchrun run whose every rank ignores SIGTERM (a script that traps it to finish
an epoch, or a library that swallows it) and whose loss goes NaN at --nan-at.

Each rank writes its pid and the torchrun agent's into ITERA_RUN_DIR/rank-<r>.pid,
so a test can check that, after the engine's SIGKILL, no rank (and no agent) is
left. Rank 0 logs through the SDK; the ranks stay in step with an all_reduce.
"""

import argparse
import math
import os
import signal
import time

import torch
import torch.distributed as dist

from tui import training

p = argparse.ArgumentParser()
p.add_argument("--nan-at", type=int, default=5)
args = p.parse_args()
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
run = training.attach()
signal.signal(signal.SIGTERM, signal.SIG_IGN)  # after attach: it would catch it otherwise
with open(os.path.join(run.run_dir, f"rank-{rank}.pid"), "w") as f:
    f.write(f"{os.getpid()} {os.getppid()}\n")
step = 0
while True:
    step += 1
    total = torch.tensor([1.0])
    dist.all_reduce(total)
    if rank == 0:
        run.log(step, loss=math.nan if step >= args.nan_at else 1.0 / step)
    time.sleep(0.1)
