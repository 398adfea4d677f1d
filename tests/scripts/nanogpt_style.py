"""A training loop shaped like karpathy/nanoGPT's train.py, for process tests.

It prints what nanoGPT prints (`iter N: loss X, time Tms, mfu M%` every
log_interval, `step N: train loss X, val loss Y` every eval_interval), counts
its own iterations up to --max-iters and, like nanoGPT, knows nothing of
itera-tui: it ignores ITERA_MAX_STEPS and the control file, so a pilot bound
only stops it by signal. --nan-from K: the loss is NaN from iter K on.
"""

import argparse
import math
import time

p = argparse.ArgumentParser()
p.add_argument("--max-iters", type=int, default=300)
p.add_argument("--log-interval", type=int, default=10)
p.add_argument("--eval-interval", type=int, default=50)
p.add_argument("--nan-from", type=int, default=None)
p.add_argument("--sleep", type=float, default=0.02)
args = p.parse_args()

print("tokens per iteration will be: 8,192", flush=True)
for it in range(args.max_iters + 1):
    loss = 4.0 / (1 + it / 50)
    if args.nan_from is not None and it >= args.nan_from:
        loss = math.nan
    if it % args.eval_interval == 0:
        val = loss + 0.1
        print(f"step {it}: train loss {loss:.4f}, val loss {val:.4f}", flush=True)
    if it % args.log_interval == 0:
        print(f"iter {it}: loss {loss:.4f}, time 12.34ms, mfu 1.23%", flush=True)
        time.sleep(args.sleep)
