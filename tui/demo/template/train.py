"""A tiny training script that `itera-tui init` wrote: replace the model and data with yours.

It fits y = 3x + 1 with a linear layer on the CPU and talks to itera-tui only through
`tui.training`: a loss every step, a validation loss every 10 steps, a checkpoint when
asked (the `c` key, the wrap-up), a clean stop on request, and `model.pt` at the end.
Outside itera-tui it runs the same (`python train.py`) and writes into this folder.
"""

import argparse
import sys
from pathlib import Path

import torch

from tui import training


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--steps", type=int, default=300)
    args = parser.parse_args(argv)

    run = training.attach(checkpoint_on_sigterm=True)  # harmless outside itera-tui
    steps = run.max_steps or args.steps                 # a pilot stops early
    torch.manual_seed(0)
    x = torch.rand(256, 1)
    y = 3 * x + 1 + 0.05 * torch.randn(256, 1)
    x_val, y_val = x[:64], y[:64]
    model = torch.nn.Linear(1, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    step = 0
    if run.resume_from:                                 # a restart goes on where it stopped
        step = training.load_checkpoint(run.resume_from, model=model, optimizer=optimizer)["step"]

    while step < steps:
        loss = torch.nn.functional.mse_loss(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if not run.log(step, loss=loss.item()):         # False on a NaN: the rule stops us
            return 3
        if step % 10 == 0:
            with torch.no_grad():
                val_loss = torch.nn.functional.mse_loss(model(x_val), y_val).item()
            run.log(step, val_loss=val_loss)
        if run.checkpoint_requested(step) or run.stop_requested():
            run.save_checkpoint(model=model, optimizer=optimizer, step=step)
            if run.stop_requested():
                return 0

    training.save_artifact(Path(run.run_dir) / "model.pt", state_dict=model.state_dict(),
                           meta={"model": "torch.nn.Linear(1, 1)", "lr": args.lr, "steps": step})
    print(f"done: {step} steps, wrote model.pt in {run.run_dir}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
