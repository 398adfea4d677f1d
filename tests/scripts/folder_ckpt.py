"""A run that saves checkpoint FOLDERS as HF's Trainer does (store tests).

Usage: folder_ckpt.py [--steps N] [--every K] [--sleep S] [--more M]
Every K steps it writes `out/checkpoint-<step>/` (weights as a small safetensors
file written by hand, no torch needed here, a config, and `trainer_state.json`
last, as HF writes it) and acknowledges the folder as `tui.integrations.hf`'s
callback does (`run.acknowledge_checkpoint(..., mode="hf")`). With ITERA_RESUME
(a run its box cut, continued) it reads the step from that folder's
`trainer_state.json`, writes the path it was given to `resumed_from.txt`, and goes
on from the step after it for M more steps; its last record carries `acc`.
"""

import argparse
import json
import os
import struct
import time
from pathlib import Path

from tui import training

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=60)
p.add_argument("--every", type=int, default=10)
p.add_argument("--sleep", type=float, default=0.05)
p.add_argument("--more", type=int, default=5)
args = p.parse_args()


def save(folder: Path, step: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    header = json.dumps({"w": {"dtype": "F32", "shape": [2],
                               "data_offsets": [0, 8]}}).encode()
    weights = struct.pack("<Q", len(header)) + header + struct.pack("<2f", 0.5, float(step))
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text(json.dumps({"hidden": 2}))
    (folder / "sub").mkdir(exist_ok=True)
    (folder / "sub" / "notes.txt").write_text(f"saved at step {step}\n" * 100)
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))


run = training.attach()
start, steps = 1, args.steps
if run.resume_from is not None:
    resumed = Path(run.resume_from)
    (run.run_dir / "resumed_from.txt").write_text(os.environ["ITERA_RESUME"])
    done = json.loads((resumed / "trainer_state.json").read_text())["global_step"]
    start, steps = done + 1, done + args.more
for step in range(start, steps + 1):
    run.log(step, loss=2.0 / step, acc=0.6 if step == steps else 0.1)
    if step % args.every == 0:
        folder = run.run_dir / "out" / f"checkpoint-{step}"
        save(folder, step)
        run.acknowledge_checkpoint(folder, step=step, mode="hf")
    if run.stop_requested():
        break
    time.sleep(args.sleep)
