"""A run that hits a hiccup once (the `[retry]` tests): its first attempt saves a real
checkpoint through the SDK at --die-at, says a Xid on stderr as a driver would, and dies
by SIGKILL (as the OOM killer ends a run: its launcher records exit -9); an attempt
given ITERA_RESUME loads that checkpoint, goes on from the step after it and finishes,
printing the decision metric and leaving its deliverable.

Usage: hiccup.py [--steps N] [--die-at K] [--sleep S] [--acc A]
"""

import argparse
import os
import signal
import sys
import time

import torch

from tui import training

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=20)
p.add_argument("--die-at", type=int, default=8)
p.add_argument("--sleep", type=float, default=0.02)
p.add_argument("--acc", type=float, default=0.7)
args = p.parse_args()

run = training.attach()
model = torch.nn.Linear(4, 2)
start = 1
if run.resume_from is not None:
    payload = training.load_checkpoint(run.resume_from, model=model)
    start = int(payload["step"]) + 1
    print(f"resumed from step {payload['step']}", flush=True)
for step in range(start, args.steps + 1):
    run.log(step, loss=1.0 / step)
    print(f"step {step} loss {1.0 / step:.4f}", flush=True)
    if step == args.die_at and run.resume_from is None:
        run.save_checkpoint(model=model, step=step)
        print("NVRM: Xid 79, GPU has fallen off the bus", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(args.sleep)
print(f"step {args.steps} acc={args.acc} started_at={start}", flush=True)
(run.run_dir / "model.pt").write_text("weights\n")
