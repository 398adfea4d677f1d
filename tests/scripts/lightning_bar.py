"""A tiny Lightning fit that only prints its progress bar, for the feed's tests.

Usage: lightning_bar.py [--bar tqdm|rich] [--epochs N] [--batches N] [--nan-at K]
                        [--sleep S] [--truth PATH]
The model is a 4 -> 1 linear layer on random data made here (nothing is
downloaded). `train_loss` and `val_loss` go to the bar (prog_bar=True); from
global step K on the training loss is NaN. `--truth` writes, at the end, what
was really logged: one [epoch, batch number in the epoch (1-based, as the bar
counts), global step, loss] per training batch, so a test can compare the bar
the feed read with the values Lightning computed. Honours ITERA_MAX_STEPS.
"""

import argparse
import json
import math
import os
import time

import lightning as L
import torch
from lightning.pytorch.callbacks import Callback, RichProgressBar, TQDMProgressBar
from torch.utils.data import DataLoader, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--bar", choices=("tqdm", "rich"), default="tqdm")
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--batches", type=int, default=8)
p.add_argument("--nan-at", type=int, default=None)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--truth", default=None)
args = p.parse_args()


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        if args.nan_at is not None and self.global_step >= args.nan_at:
            loss = loss * float("nan")
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y), prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


class Truth(Callback):
    def __init__(self):
        self.rows = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        loss = float(outputs["loss"])
        self.rows.append([trainer.current_epoch, batch_idx + 1, trainer.global_step,
                          None if math.isnan(loss) else loss])
        time.sleep(args.sleep)


torch.manual_seed(0)
x = torch.randn(8 * args.batches, 4)
data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
truth = Truth()
bar = TQDMProgressBar() if args.bar == "tqdm" else RichProgressBar()
max_steps = int(os.environ.get("ITERA_MAX_STEPS") or -1)
trainer = L.Trainer(max_epochs=args.epochs, max_steps=max_steps, logger=False,
                    enable_checkpointing=False, enable_model_summary=False, accelerator="cpu",
                    num_sanity_val_steps=0, limit_val_batches=2, callbacks=[bar, truth])
trainer.fit(Tiny(), data, data)
if args.truth:
    with open(args.truth, "w") as f:
        json.dump(truth.rows, f)
