"""A small SDK training loop on CUDA (the GPU-box tests: tests/test_gpu_box.py).

Usage: cuda_train.py [--busy-steps N] [--idle] [--sleep S] [--async-save]
It trains a model on the GPU for --busy-steps steps (so the optimizer's state is CUDA
tensors too), then, with --idle, goes on printing a step and a loss every --sleep
seconds without touching the GPU while it holds its memory: a deadlocked data loader
as NVML sees it. Whenever the engine asks, when it is stopped, and at its last step
without --idle, it saves a checkpoint of its CUDA tensors with the SDK; after each
save it prints the next number the CUDA generator draws (`cuda-draw=…`), so a reload
can show the generator was saved with the weights. Without CUDA it says so and exits 3.
"""

import argparse
import sys
import time

import torch

from tui import training

p = argparse.ArgumentParser()
p.add_argument("--busy-steps", type=int, default=20)
p.add_argument("--idle", action="store_true")
p.add_argument("--sleep", type=float, default=0.5)
p.add_argument("--async-save", action="store_true")
args = p.parse_args()

if not torch.cuda.is_available():
    print("no CUDA here", file=sys.stderr, flush=True)
    sys.exit(3)

run = training.attach()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 4)).cuda()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
held = torch.empty(256 * 2**20, dtype=torch.uint8, device="cuda")  # 256 MiB held throughout


def save(step: int) -> None:
    info = run.save_checkpoint(model=model, optimizer=optimizer, step=step,
                               data_state={"seen": step * 64}, async_=args.async_save)
    if args.async_save:
        info = run.wait_for_checkpoint()
    draw = torch.rand(1, device="cuda").item()  # the generator as the checkpoint holds it
    print(f"saved step {step} at {info.path} cuda-draw={draw!r}", flush=True)


step = 0
while True:
    step += 1
    if step <= args.busy_steps:
        x = torch.randn(64, 256, device="cuda")
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        value = loss.item()
    else:
        value = 1.0 / step
    run.log(step, loss=value)
    print(f"step {step} loss {value:.5f}", flush=True)
    stop = run.stop_requested()
    last = not args.idle and step >= args.busy_steps
    if run.checkpoint_requested(step) or stop or last:
        save(step)
    if stop or last:
        break
    if step > args.busy_steps:
        time.sleep(args.sleep)
del held
