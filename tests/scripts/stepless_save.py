"""Prints `step N loss X` lines and, at --save-at, writes `model.pt` (a plain
torch state_dict: no step in its name or content), then waits until the engine
has acknowledged it (its ledger line) before printing on: the checkpoint's step
can then only come from the records read when it appeared."""

import argparse
import os
import time
from pathlib import Path

import torch

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=20)
p.add_argument("--save-at", type=int, default=10)
args = p.parse_args()
run_dir = Path(os.environ["ITERA_RUN_DIR"])
ledger = run_dir.parent.parent / "ledger.jsonl"
for step in range(1, args.steps + 1):
    print(f"step {step} loss {2.0 / step:.4f}", flush=True)
    time.sleep(0.05)
    if step == args.save_at:
        time.sleep(0.5)  # the engine reads this step's line before the file appears
        torch.save({"w": torch.ones(2)}, run_dir / "model.pt")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "checkpoint_acknowledged" not in (
                ledger.read_text() if ledger.exists() else ""):
            time.sleep(0.05)
