"""How much does checkpointing cost, next to what the disk and memory allow?

Builds about 500 MB of training state (a stack of Linear layers and its AdamW
state) and, in each of several rounds, measures side by side in one process:

- a synchronous save_checkpoint against a raw sequential write + fsync of the
  same bytes in the same directory (throughput ratio, goal >= 0.8x);
- load_checkpoint into the model and optimizer against a raw read of the file
  into an allocated buffer (both from a warm page cache);
- the training stall of an async save against a bare copy of the same tensors
  into CPU memory (goal <= 1.5x) and against the synchronous save.

Prints medians and ratios. Usage: python bench/checkpoint_bench.py [--mb 500]
[--rounds 7] [--dir DIR] (DIR: where checkpoints will live; default: a
temporary directory).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from tui import training


def build_state(megabytes: int):
    width = 2048
    layers = max(1, round(megabytes * 1e6 / (3 * 4 * width * (width + 1))))  # params + 2 Adam moments
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(layers)])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    model(torch.randn(8, width)).square().mean().backward()
    optimizer.step()
    return model, optimizer


def state_tensors(model, optimizer) -> list[torch.Tensor]:
    tensors = list(model.state_dict().values())
    for per_param in optimizer.state_dict()["state"].values():
        tensors += [v for v in per_param.values() if isinstance(v, torch.Tensor)]
    return tensors


def timed(fn, cpu: dict | None = None, key: str = "") -> float:
    cpu_start, start = time.process_time(), time.perf_counter()
    fn()
    if cpu is not None:
        cpu[key] = time.process_time() - cpu_start
    return time.perf_counter() - start


def raw_write(path: Path, blob: bytes) -> None:
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(blob)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    finally:
        os.close(fd)


def raw_read(path: Path, into: bytearray) -> None:
    """Read the whole file into an already allocated buffer (no page faults timed)."""
    view, done = memoryview(into), 0
    with open(path, "rb", buffering=0) as f:
        while done < len(view):
            n = f.readinto(view[done:])
            if not n:
                break
            done += n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=int, default=500, help="approximate state size in MB")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--dir", default=None, help="directory on the checkpoint disk")
    args = parser.parse_args()

    model, optimizer = build_state(args.mb)
    state_bytes = sum(t.numel() * t.element_size() for t in state_tensors(model, optimizer))
    work = Path(tempfile.mkdtemp(prefix="checkpoint-bench-", dir=args.dir))
    run = training.attach(env={"ITERA_RUN_DIR": str(work), "ITERA_METRICS": str(work / "metrics.jsonl")},
                          checkpoint_on_sigterm=False)
    sync_path, async_path, raw_path = work / "sync.pt", work / "async.pt", work / "raw.bin"
    keys = ("save", "raw_write", "sha256", "load", "raw_read", "stall", "copy", "async_write",
            "save_cpu", "raw_write_cpu")
    times: dict[str, list[float]] = {k: [] for k in keys}
    load_before = os.getloadavg()[0]
    blob, read_buffer = b"", bytearray()
    try:
        for round_ in range(args.rounds + 1):  # round 0 warms up allocator and page cache
            sample, cpu = {}, {}

            def save():
                sample["save"] = timed(lambda: run.save_checkpoint(model=model, optimizer=optimizer,
                                                                   step=round_, path=sync_path), cpu, "save_cpu")

            if not blob:
                save()
                blob = sync_path.read_bytes()
                read_buffer = bytearray(blob)
            elif round_ % 2:
                save()
            # alternate the order, so neither side always meets the page cache state the other left
            sample["raw_write"] = timed(lambda: raw_write(raw_path, blob), cpu, "raw_write_cpu")
            if "save" not in sample:
                save()
            sample["sha256"] = timed(lambda: hashlib.sha256(blob).digest())
            sample["raw_read"] = timed(lambda: raw_read(sync_path, read_buffer))
            sample["load"] = timed(lambda: training.load_checkpoint(sync_path, model=model, optimizer=optimizer,
                                                                    restore_rng=False))
            sample["copy"] = timed(lambda: [t.clone() for t in state_tensors(model, optimizer)])
            info = run.save_checkpoint(model=model, optimizer=optimizer, step=round_, path=async_path,
                                       async_=True)
            sample["stall"] = info.block_s
            sample["async_write"] = run.wait_for_checkpoint().write_s
            sample.update(cpu)
            if round_:
                for key, value in sample.items():
                    times[key].append(value)
            print(f"round {round_}{' (warm-up)' if not round_ else ''}: "
                  + "  ".join(f"{k} {v:.3f}" for k, v in sample.items()), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = {k: statistics.median(v) for k, v in times.items()}
    size = len(blob)
    print(f"\ncheckpoint bench: {state_bytes / 1e6:.0f} MB of state ({size / 1e6:.0f} MB file), "
          f"{args.rounds} rounds, medians; {os.cpu_count()} CPUs, torch {torch.__version__}")
    print(f"  save_checkpoint (sync)          {med['save']:.3f} s  {size / med['save'] / 1e9:.2f} GB/s")
    print(f"  raw write + fsync, same bytes   {med['raw_write']:.3f} s  {size / med['raw_write'] / 1e9:.2f} GB/s")
    print(f"  -> save throughput / raw write  {med['raw_write'] / med['save']:.2f}x   (goal >= 0.8x)")
    print(f"     CPU seconds: save {med['save_cpu']:.3f}, raw write {med['raw_write_cpu']:.3f}; "
          f"sha256 of the bytes in memory alone {med['sha256']:.3f} s")
    print(f"  load_checkpoint (model+optim)   {med['load']:.3f} s")
    print(f"  raw read of the file            {med['raw_read']:.3f} s")
    print(f"  -> load time / raw read         {med['load'] / med['raw_read']:.2f}x")
    print(f"  async save: training stall      {med['stall']:.3f} s  (background write {med['async_write']:.3f} s)")
    print(f"  bare copy of the state to CPU   {med['copy']:.3f} s")
    print(f"  -> async stall / bare copy      {med['stall'] / med['copy']:.2f}x   (goal <= 1.5x)")
    print(f"  -> async stall / sync save      {med['stall'] / med['save']:.2f}x")
    print(f"  load average (1 min) before/after: {load_before:.1f} / {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
