"""A Lightning script with the one-line itera callback.

What a user's Lightning script looks like under itera-tui: a LightningModule
(an MLP with dropout, AdamW and a cosine schedule over the planned steps), data
made here, `L.Trainer(..., callbacks=[IteraCallback()])` and
`fit(..., ckpt_path=resume_from())`. Used by tests/test_integrations_lightning.py
and ready for full campaigns:

    command = ["python", "tests/scripts/lightning_train.py", "--steps", "60"]

The loader keeps its position (`state_dict`/`load_state_dict`), which is what
Lightning needs to resume mid-epoch on the same batches. --model-checkpoint
uses Lightning's own ModelCheckpoint and no itera callback at all (the
`[checkpoint] watch` case); --sleep S slows each step so a test can send
requests mid-run.
"""

import argparse
import os
import time

import torch

try:
    import lightning as L
    from lightning.pytorch.callbacks import Callback, ModelCheckpoint
except ImportError:  # the older package name
    import pytorch_lightning as L
    from pytorch_lightning.callbacks import Callback, ModelCheckpoint

from tui.integrations import resume_from

FEATURES, EXAMPLES, BATCH = 8, 96, 8


class ResumableBatches:
    """Shuffled batches, a new order each epoch, resumable at any batch.

    Lightning prefetches one batch ahead, so the position saved is the number
    of batches Lightning has consumed (`consumed`), kept by the module."""

    def __init__(self, inputs, targets):
        self.inputs, self.targets = inputs, targets
        self.epoch, self.start = 0, 0

    def __len__(self):
        return len(self.inputs) // BATCH

    def __iter__(self):
        order = torch.randperm(len(self.inputs), generator=torch.Generator().manual_seed(self.epoch))
        start, self.start = self.start, 0
        for index in range(start, len(self)):
            rows = order[index * BATCH:(index + 1) * BATCH]
            yield self.inputs[rows], self.targets[rows]
        self.epoch += 1

    def state_dict(self):
        return {"epoch": self.epoch, "start": self.consumed}

    def load_state_dict(self, state):
        self.epoch, self.start = state["epoch"], state["start"]

    consumed = 0


class Regressor(L.LightningModule):
    def __init__(self, planned_steps: int):
        super().__init__()
        self.planned_steps = planned_steps
        self.net = torch.nn.Sequential(torch.nn.Linear(FEATURES, 32), torch.nn.ReLU(),
                                       torch.nn.Dropout(0.2), torch.nn.Linear(32, 1))

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.net(x), y)
        self.log("loss", loss, on_step=True, on_epoch=False)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", torch.nn.functional.mse_loss(self.net(x), y))

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW(self.parameters(), lr=1e-2)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=self.planned_steps)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class Pace(Callback):
    """Counts consumed batches for the loader's state; slows steps for tests."""

    def __init__(self, loader, sleep):
        self.loader, self.sleep = loader, sleep

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.loader.consumed = batch_idx + 1
        if self.sleep:
            time.sleep(self.sleep)


def data():
    generator = torch.Generator().manual_seed(7)
    inputs = torch.randn(EXAMPLES, FEATURES, generator=generator)
    targets = inputs @ torch.randn(FEATURES, 1, generator=generator) + 0.1
    return inputs, targets


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--model-checkpoint", action="store_true",
                        help="Lightning's ModelCheckpoint every N steps, no itera callback")
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--ckpt-dir", default=os.path.join(os.environ.get("ITERA_RUN_DIR", "."),
                                                           "lightning-ckpts"))
    parser.add_argument("--sleep", type=float, default=0.0)
    args = parser.parse_args()

    torch.set_num_threads(1)
    L.seed_everything(0, workers=True)
    inputs, targets = data()
    train = ResumableBatches(inputs, targets)
    val = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(inputs[:32], targets[:32]),
                                      batch_size=32)
    callbacks = [Pace(train, args.sleep)]
    if args.model_checkpoint:
        callbacks.append(ModelCheckpoint(dirpath=args.ckpt_dir, every_n_train_steps=args.every,
                                         save_top_k=-1, filename="{step}"))
    else:
        from tui.integrations.lightning import IteraCallback
        callbacks.append(IteraCallback())
    trainer = L.Trainer(max_steps=args.steps, accelerator="cpu", devices=1, logger=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        enable_checkpointing=args.model_checkpoint, callbacks=callbacks,
                        val_check_interval=10, deterministic=True)
    trainer.fit(Regressor(args.steps), train_dataloaders=train, val_dataloaders=val,
                ckpt_path=resume_from())


if __name__ == "__main__":
    main()
