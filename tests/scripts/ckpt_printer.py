"""A small real training loop on the SDK that answers checkpoint requests.

Usage: ckpt_printer.py [--steps N] [--sleep S]   (control-room tests)
It logs through `tui.training`, and when the engine asks (ITERA_CONTROL) it
saves a real checkpoint of a tiny torch model with the SDK, which writes,
hashes and acknowledges it: the engine then verifies it in a fresh process.
"""

import argparse
import time

import torch

from tui import training

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=100000)
p.add_argument("--sleep", type=float, default=0.05)
args = p.parse_args()

run = training.attach()
model = torch.nn.Linear(4, 2)
steps = run.max_steps or args.steps
for step in range(1, steps + 1):
    run.log(step, loss=2.0 / step, acc=0.5)
    if run.checkpoint_requested(step):
        run.save_checkpoint(model=model, step=step)
    if run.stop_requested():
        break
    time.sleep(args.sleep)
