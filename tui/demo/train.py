"""The demo campaign's training script: a real, resumable torch run on CPU.

Why it exists: the control room has to be shown on something true.  This
script talks to the engine only through ``tui.training``: it logs a loss every
step, honours checkpoint and stop requests, resumes bitwise (fixed seed, one
thread, batch order saved in ``data_state``), and at the end delivers
``predictions.jsonl``, ``error_analysis.json``, a reloadable ``model.pt`` and a
final checkpoint into the run directory.

Steps count from 1; step 0 is "before training" and carries the truncation
count.  A checkpoint's ``step`` is the number of completed steps.  When a loss
is non-finite the optimizer is not stepped; the script logs a few more steps,
waits up to a minute to be stopped, and exits with status 3.

    python -m tui.demo.train --lr 3e-3 --steps 800            # control
    python -m tui.demo.train --lr 3e3 --steps 800             # goes non-finite at step 24
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from tui import training
from tui.demo import corpus, dataset, report
from tui.demo.model import TopicGRU

EXIT_NON_FINITE = 3
STEPS_AFTER_NON_FINITE = 5
WAIT_TO_BE_STOPPED_S = 60.0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tui.demo.train",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--embed", type=int, default=32)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--max-len", type=int, default=64)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--val-every", type=int, default=25)
    parser.add_argument("--data", type=Path, default=dataset.DATA_DIR)
    parser.add_argument("--resume", type=Path, default=None)
    return parser.parse_args(argv)


class Trainer:
    def __init__(self, args: argparse.Namespace, run):
        self.args, self.run = args, run
        torch.set_num_threads(1)
        torch.use_deterministic_algorithms(True)
        torch.manual_seed(args.seed)
        self.train_split, self.val_split = dataset.load(args.data, args.max_len)
        self.model = TopicGRU(corpus.VOCAB_SIZE, corpus.NUM_CLASSES, args.hidden, args.embed)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=args.lr,
                                           weight_decay=args.weight_decay)
        self.total = run.max_steps if run.max_steps is not None else args.steps
        # The schedule spans the planned steps, so a pilot's first steps equal the full run's.
        self.scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(
            self.optimizer, T_max=max(args.steps, self.total))
        self.order = dataset.BatchOrder(len(self.train_split.ids), args.batch_size, args.seed)
        self.step = 0  # completed steps
        self.val_acc: float | None = None

    def resume(self, path: Path) -> None:
        state = training.load_checkpoint(path, model=self.model, optimizer=self.optimizer,
                                         scheduler=self.scheduler)
        self.order.restore(state["data_state"])
        self.step = int(state["step"])
        print(f"resumed from {path} at step {self.step}", flush=True)

    def checkpoint(self, final: bool = False):
        return self.run.save_checkpoint(
            model=self.model, optimizer=self.optimizer, scheduler=self.scheduler,
            step=self.step, data_state=self.order.state(),
            extra={"val_acc": self.val_acc, "final": final, "hyperparameters": self.hyper()})

    def hyper(self) -> dict:
        a = self.args
        return {"lr": a.lr, "steps": a.steps, "max_steps": self.run.max_steps,
                "hidden": a.hidden, "embed": a.embed, "batch_size": a.batch_size,
                "weight_decay": a.weight_decay, "max_len": a.max_len, "seed": a.seed,
                "val_every": a.val_every, "optimizer": "AdamW", "scheduler": "cosine"}

    def train_step(self) -> float:
        batch = self.order.next()
        logits = self.model(self.train_split.tokens[batch], self.train_split.lengths[batch])
        loss = torch.nn.functional.cross_entropy(logits, self.train_split.labels[batch])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        return loss.item()

    def validate(self) -> dict:
        result = report.evaluate(self.model, self.val_split)
        self.val_acc = result["acc"]
        self.run.log(self.step, val_acc=result["acc"], val_loss=result["loss"])
        print(f"step {self.step}/{self.total}  val_acc {result['acc']:.3f}  "
              f"val_loss {result['loss']:.4f}", flush=True)
        return result

    def fit(self) -> int:
        truncated = self.train_split.truncated + self.val_split.truncated
        examples = len(self.train_split.ids) + len(self.val_split.ids)
        self.run.log(self.step, truncated=truncated, examples=examples)
        print(f"{examples} examples, {truncated} longer than {self.args.max_len} tokens "
              f"(truncated); training steps {self.step + 1}..{self.total}", flush=True)
        while self.step < self.total:
            lr = self.optimizer.param_groups[0]["lr"]
            loss = self.train_step()
            if not self.run.log(self.step + 1, loss=loss, lr=lr):
                return self.broken(self.step + 1, loss)
            self.optimizer.step()
            self.scheduler.step()
            self.step += 1
            if self.step % self.args.val_every == 0 and self.step < self.total:
                self.validate()
            if self.run.stop_requested():
                self.checkpoint()
                print(f"stop requested: checkpoint at step {self.step}, exiting", flush=True)
                return 0
            if self.step < self.total and self.run.checkpoint_requested(self.step):
                self.checkpoint()  # at the last step, finish() saves the final one
        self.finish()
        return 0

    def broken(self, step: int, loss: float) -> int:
        """Non-finite loss: never step the optimizer again; log, wait, exit 3."""
        print(f"non-finite loss {loss} at step {step}; not stepping the optimizer", flush=True)
        for later in range(step + 1, step + 1 + STEPS_AFTER_NON_FINITE):
            if self.run.stop_requested():
                return EXIT_NON_FINITE
            self.run.log(later, loss=self.train_step(),
                         lr=self.optimizer.param_groups[0]["lr"])
        deadline = time.monotonic() + WAIT_TO_BE_STOPPED_S
        while time.monotonic() < deadline and not self.run.stop_requested():
            time.sleep(0.1)
        print("exiting with status 3 (non-finite loss)", flush=True)
        return EXIT_NON_FINITE

    def finish(self) -> None:
        result = self.validate()
        out = Path(self.run.run_dir)
        out.mkdir(parents=True, exist_ok=True)
        report.write_predictions(out / "predictions.jsonl", self.val_split, result)
        report.write_error_analysis(out / "error_analysis.json", report.error_analysis(
            self.val_split, result, corpus.NUM_CLASSES, self.args.max_len))
        meta = {"model": "tui.demo.model.TopicGRU", "vocab_size": corpus.VOCAB_SIZE,
                "num_classes": corpus.NUM_CLASSES, "hidden": self.args.hidden,
                "embed": self.args.embed, "max_len": self.args.max_len,
                "val_acc": result["acc"], "val_loss": result["loss"], "steps": self.step,
                "hyperparameters": self.hyper(),
                "reload": "tui.demo.model.from_meta(meta).load_state_dict(state_dict)",
                "builder": "tui.demo.model:from_meta", "predict": "tui.demo.predict:predictions"}
        training.save_artifact(out / "model.pt", state_dict=self.model.state_dict(), meta=meta)
        self.checkpoint(final=True)
        print(f"done: val_acc {result['acc']:.3f}; wrote predictions.jsonl, "
              f"error_analysis.json, model.pt in {out}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = training.attach(checkpoint_on_sigterm=True)
    trainer = Trainer(args, run)
    resume_from = args.resume or run.resume_from
    if resume_from:
        trainer.resume(Path(resume_from))
    return trainer.fit()


if __name__ == "__main__":
    sys.exit(main())
