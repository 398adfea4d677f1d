"""A tiny, deterministic training script that speaks the itera run protocol.

Used by the SDK tests (resume, resume_check, SIGTERM) as the stand-in for a
user's script: AdamW, a StepLR scheduler, a CPU GradScaler under bf16
autocast, dropout (torch RNG), python/numpy noise, and a shuffled loader whose
position (epoch, batch) goes into the checkpoint. It honours ITERA_MAX_STEPS,
ITERA_RESUME and ITERA_CHECKPOINT_AT through tui.training.

Flags make broken variants for the negative tests: --no-restore-rng and
--no-restore-optimizer resume without that state.
"""

import argparse
import random
import time

import numpy as np
import torch

from tui import training

BATCH = 16


def batch_indices(epoch: int, index: int, n: int) -> torch.Tensor:
    order = torch.randperm(n, generator=torch.Generator().manual_seed(1000 + epoch))
    return order[index * BATCH:(index + 1) * BATCH]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--no-restore-rng", action="store_true")
    parser.add_argument("--no-restore-optimizer", action="store_true")
    parser.add_argument("--async-save", action="store_true")
    parser.add_argument("--sleep", type=float, default=0.0, help="seconds per step")
    args = parser.parse_args()

    run = training.attach()
    torch.set_num_threads(1)
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)
    data_gen = torch.Generator().manual_seed(7)
    inputs = torch.randn(128, 16, generator=data_gen)
    targets = inputs @ torch.randn(16, 1, generator=data_gen) + 0.1
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Dropout(0.2),
                                torch.nn.Linear(32, 1))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=4, gamma=0.8)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**10, growth_interval=3)
    batches_per_epoch = len(inputs) // BATCH

    step, epoch, index = 0, 0, 0
    if run.resume_from is not None:
        state = training.load_checkpoint(
            run.resume_from, model=model,
            optimizer=None if args.no_restore_optimizer else optimizer,
            scheduler=scheduler, scaler=scaler, restore_rng=not args.no_restore_rng)
        step = state["step"]
        epoch, index = state["data_state"]["epoch"], state["data_state"]["index"]
        run.event("resumed", step=step)

    last = run.max_steps if run.max_steps is not None else args.steps
    while step < last:
        step += 1
        idx = batch_indices(epoch, index, len(inputs))
        noise = 0.01 * random.gauss(0.0, 1.0) + 0.01 * float(np.random.randn())
        with torch.autocast("cpu", dtype=torch.bfloat16):
            prediction = model(inputs[idx] + noise)
        loss = torch.nn.functional.mse_loss(prediction.float(), targets[idx])
        optimizer.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        scheduler.step()
        index += 1
        if index == batches_per_epoch:
            epoch, index = epoch + 1, 0
        run.log(step, loss=loss.item(), lr=scheduler.get_last_lr()[0], scale=scaler.get_scale())
        stop = run.stop_requested()
        if run.checkpoint_requested(step) or stop:
            run.save_checkpoint(model=model, optimizer=optimizer, scheduler=scheduler, scaler=scaler,
                                step=step, data_state={"epoch": epoch, "index": index},
                                async_=args.async_save)
        if stop:
            break
        if args.sleep:
            time.sleep(args.sleep)
    run.wait_for_checkpoint()


if __name__ == "__main__":
    main()
