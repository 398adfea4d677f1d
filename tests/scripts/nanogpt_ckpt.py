"""karpathy/nanoGPT's train.py loop with its checkpointing, on a toy model, for
process tests of a checkpoint the script saves by itself.

As nanoGPT does: options as `--key=value` (its configurator), every eval_interval
`step N: train loss X, val loss Y`, then (always_save_checkpoint) `saving
checkpoint to OUT` and `torch.save` of {model, optimizer, model_args, iter_num,
best_val_loss, config} to OUT/ckpt.pt, and every log_interval `iter N: loss X,
time Tms, mfu M%`. Like nanoGPT it knows nothing of itera-tui: it ignores
ITERA_MAX_STEPS, so a pilot bound stops it only by signal.
"""

import os
import sys
import time

import torch

out_dir = "out"
eval_interval = 50
log_interval = 1
max_iters = 3000
always_save_checkpoint = True
sleep = 0.02
for arg in sys.argv[1:]:  # nanoGPT's configurator, for the keys above
    key, value = arg.removeprefix("--").split("=", 1)
    globals()[key] = type(globals()[key])(value) if key != "always_save_checkpoint" \
        else value == "True"
config = {k: globals()[k] for k in ("out_dir", "eval_interval", "log_interval",
                                    "max_iters", "always_save_checkpoint")}
os.makedirs(out_dir, exist_ok=True)

torch.manual_seed(1337)
model_args = dict(n_layer=1, n_head=1, n_embd=8, block_size=8, bias=False, vocab_size=8,
                  dropout=0.0)
model = torch.nn.Linear(8, 8)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
x, y = torch.randn(64, 8), torch.randn(64, 8)
iter_num, best_val_loss = 0, 1e9
while True:
    if iter_num % eval_interval == 0:
        with torch.no_grad():
            losses = {"train": torch.nn.functional.mse_loss(model(x), y),
                      "val": torch.nn.functional.mse_loss(model(x), y) + 0.1}
        print(f"step {iter_num}: train loss {losses['train']:.4f}, val loss "
              f"{losses['val']:.4f}", flush=True)
        if losses["val"] < best_val_loss or always_save_checkpoint:
            best_val_loss = losses["val"]
            if iter_num > 0:
                checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                              "model_args": model_args, "iter_num": iter_num,
                              "best_val_loss": best_val_loss, "config": config}
                print(f"saving checkpoint to {out_dir}", flush=True)
                torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))
    t0 = time.time()
    loss = torch.nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    time.sleep(sleep)
    if iter_num % log_interval == 0:
        print(f"iter {iter_num}: loss {loss.item():.4f}, time {(time.time() - t0) * 1000:.2f}ms, "
              f"mfu {-100.0:.2f}%", flush=True)
    iter_num += 1
    if iter_num > max_iters:
        break
