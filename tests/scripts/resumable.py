"""A small SDK training loop that resumes where its checkpoint left off (box-move tests).

Usage: resumable.py [--steps N] [--sleep S] [--acc A] [--die-at K]
With ITERA_RESUME (the engine continuing a run its box cut) it loads that
checkpoint with the SDK and goes on from the step after it; it saves a real
checkpoint when the engine asks, and when it is stopped (SIGTERM, as a
shutdown sends it) it saves one before it exits. Its last record carries the
decision metric `acc` (logged and printed), so an interrupted campaign and a whole
one conclude alike; a run that reaches its last step leaves its deliverable,
`predictions.jsonl`, in its run directory (a box move must carry it to count).
--die-at K (the `[retry]` tests): a first attempt (no ITERA_RESUME) saves a checkpoint
at step K, says a Xid on stderr as a driver would, and dies by SIGKILL, as the OOM
killer ends a run (its launcher records exit -9).
"""

import argparse
import os
import signal
import sys
import time

import torch

from tui import training

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=60)
p.add_argument("--sleep", type=float, default=0.1)
p.add_argument("--acc", type=float, default=0.5)
p.add_argument("--die-at", type=int, default=None)
args = p.parse_args()

run = training.attach()
model = torch.nn.Linear(4, 2)
start = 1
if run.resume_from is not None:
    payload = training.load_checkpoint(run.resume_from, model=model)
    start = int(payload["step"]) + 1
    print(f"resumed from step {payload['step']}", flush=True)
steps = run.max_steps or args.steps
for step in range(start, steps + 1):
    run.log(step, loss=2.0 / step, acc=args.acc if step == steps else 0.1)
    if step == steps:  # printed too: the store keeps a run's printed logs, and the
        print(f"step {step} acc={args.acc}", flush=True)  # verdict reads them elsewhere
    if step == args.die_at and run.resume_from is None:  # a hiccup, once
        run.save_checkpoint(model=model, step=step)
        print("NVRM: Xid 79, GPU has fallen off the bus", file=sys.stderr, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    stop = run.stop_requested()
    if run.checkpoint_requested(step) or stop:
        run.save_checkpoint(model=model, step=step)
    if stop:
        break
    if step == steps:
        (run.run_dir / "predictions.jsonl").write_text(f'{{"step": {step}}}\n')
    time.sleep(args.sleep)
