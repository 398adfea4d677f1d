"""A tiny training stand-in that delivers, for the bundle (wrap-up) tests.

Usage: deliver.py --label NAME [--steps N] [--sleep S] [--acc-end A]
                  [--nan-at K] [--blowup-at K] [--torch] [--val-every K]

It speaks the run protocol through the real SDK (`tui.training`): logs
`loss` and `acc` each step, and at the end writes deterministic deliverables
(predictions.jsonl, error_analysis.json) into the run directory. With
--torch it also saves a real checkpoint (SDK `save_checkpoint`) at step 1 and
a reloadable artifact `model.pt` at the end, so the bundle's reload check
has real torch files to load in a fresh process. With --nan-at the loss goes
non-finite and the script waits to be stopped (like a real broken run); with
--blowup-at the loss jumps to 5.9e35 (finite: no rule stops it) and the run
goes on to the end, like a run that diverged without a NaN. With --val-every
it also logs a `val_loss` every K steps (a record of its own, as an
evaluation is).
Its printed lines are deterministic and name the run directory, so the
bundle's path rewriting is exercised.
"""

import argparse
import json
import os
import sys
import time

from tui import training

p = argparse.ArgumentParser()
p.add_argument("--label", required=True)
p.add_argument("--steps", type=int, default=5)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--acc-end", type=float, default=0.7)
p.add_argument("--nan-at", type=int, default=None)
p.add_argument("--blowup-at", type=int, default=None)
p.add_argument("--torch", action="store_true")
p.add_argument("--val-every", type=int, default=None)
p.add_argument("--nan-weights", default=None,
               help="with --nan-at: on the way out, save NaN weights to this safetensors file "
                    "in the run directory (a LoRA run saving its adapter after the stop)")
args = p.parse_args()

run = training.attach()
steps = run.max_steps or args.steps
model = None
if args.torch:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Linear(2, 2)

if args.nan_weights:
    import torch  # imported now: the save after the stop must fit in the engine's grace
    from safetensors.torch import save_file

print(f"run {args.label} writes into {run.run_dir}", flush=True)
for step in range(1, steps + 1):
    loss = 2.0 / (step + 1)
    acc = 0.5 + (args.acc_end - 0.5) * step / steps
    if args.nan_at is not None and step >= args.nan_at:
        loss = float("nan")
    if args.blowup_at is not None and step >= args.blowup_at:
        loss = 5.9e35
    run.log(step, loss=loss, acc=acc)
    if args.val_every and step % args.val_every == 0:
        run.log(step, val_loss=2.2 / (step + 1) if loss < 1e30 else loss)
    print(f"step {step} loss {loss:.4f} acc {acc:.4f}", flush=True)
    if args.nan_at is not None and step >= args.nan_at:
        deadline = time.monotonic() + 30
        while not run.stop_requested() and time.monotonic() < deadline:
            time.sleep(0.05)
        print("stopped after a non-finite loss", flush=True)
        if args.nan_weights:
            save_file({f"lora_{i}": torch.full((2, 2), float("nan")) for i in range(4)},
                      os.path.join(run.run_dir, args.nan_weights))
        sys.exit(3)
    if model is not None and step == 1:
        run.save_checkpoint(model=model, step=step)
    if run.stop_requested():
        print(f"stop requested at step {step}", flush=True)
        sys.exit(0)
    time.sleep(args.sleep)

out = run.run_dir
with open(os.path.join(out, "predictions.jsonl"), "w") as f:
    for i in range(4):
        f.write(json.dumps({"id": f"{args.label}-{i}", "label": i % 2,
                            "prediction": (i + len(args.label)) % 2}) + "\n")
with open(os.path.join(out, "error_analysis.json"), "w") as f:
    json.dump({"variant": args.label, "errors": 2, "examples": 4}, f, indent=1)
if model is not None:
    training.save_artifact(os.path.join(out, "model.pt"), state_dict=model.state_dict(),
                           meta={"model": "torch.nn.Linear(2, 2)", "label": args.label})
print(f"done: deliverables written into {out}", flush=True)
