"""A torch-free training stand-in that logs SDK-style JSONL and answers checkpoint
requests from ITERA_CONTROL by writing a small file and acknowledging it.

Usage: ckpt_printer.py [--steps N] [--sleep S]   (control-room tests)
"""

import argparse
import hashlib
import json
import os
import time

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=100000)
p.add_argument("--sleep", type=float, default=0.05)
args = p.parse_args()

run_dir = os.environ.get("ITERA_RUN_DIR", ".")
metrics = open(os.environ["ITERA_METRICS"], "a")
control = os.environ.get("ITERA_CONTROL", "")
handled = 0


def write(record):
    metrics.write(json.dumps(record) + "\n")
    metrics.flush()


for step in range(1, int(os.environ.get("ITERA_MAX_STEPS") or args.steps) + 1):
    write({"t": time.time(), "step": step, "loss": 2.0 / step, "acc": 0.5})
    try:
        with open(control) as f:
            requests = [json.loads(line) for line in f if line.strip()]
    except (FileNotFoundError, ValueError):
        requests = []
    for req in requests[handled:]:
        if req.get("request") == "checkpoint":
            os.makedirs(os.path.join(run_dir, "checkpoints"), exist_ok=True)
            rel = f"checkpoints/step-{step}.bin"
            data = f"step {step}\n".encode()
            with open(os.path.join(run_dir, rel), "wb") as f:
                f.write(data)
            write({"t": time.time(), "event": "checkpoint", "path": rel,
                   "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data),
                   "write_s": 0.001, "block_s": 0.001, "step": step, "mode": "sync"})
    handled = len(requests)
    time.sleep(args.sleep)
