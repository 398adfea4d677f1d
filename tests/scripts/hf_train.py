"""A Hugging Face `Trainer` script with the one-line itera callback.

What a user's HF script looks like under itera-tui: a model built from a config
(a 1-layer GPT-2, nothing downloaded), a dataset made here, `Trainer(...,
callbacks=[IteraCallback()])` and `train(resume_from_checkpoint=resume_from())`.
Used by tests/test_integrations_hf.py and ready for full campaigns:

    command = ["python", "tests/scripts/hf_train.py", "--steps", "40"]

--no-callback leaves the callback out (plain HF for `[checkpoint] watch =
["hf-out/checkpoint-*"]`, with `--output-dir {run_dir}/hf-out`); --nan-at K
fills the weights with NaN just before step K (a divergence the default NaN
filter would hide); --sleep S slows each step so a test can send requests
mid-run.
"""

import argparse
import math
import time

import torch
from transformers import (GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback,
                          TrainingArguments)

from tui.integrations import resume_from
from tui.integrations.hf import IteraCallback

VOCAB, LENGTH, EXAMPLES = 64, 16, 96


class Sequences(torch.utils.data.Dataset):
    """Deterministic token sequences with a learnable pattern (next = prev + 1 mod VOCAB)."""

    def __len__(self):
        return EXAMPLES

    def __getitem__(self, index):
        start = (index * 7) % VOCAB
        ids = (torch.arange(LENGTH) + start) % VOCAB
        return {"input_ids": ids, "labels": ids}


class Pace(TrainerCallback):
    """Test hooks: slow steps down, or poison the weights before a given step."""

    def __init__(self, sleep: float, nan_at: int | None):
        self.sleep, self.nan_at = sleep, nan_at

    def on_step_begin(self, args, state, control, model=None, **kwargs):
        if self.nan_at is not None and state.global_step + 1 == self.nan_at:
            with torch.no_grad():
                for parameter in model.parameters():
                    parameter.fill_(math.nan)

    def on_step_end(self, args, state, control, **kwargs):
        if self.sleep:
            time.sleep(self.sleep)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--output-dir", default="hf-out")
    parser.add_argument("--save-steps", type=int, default=0, help="0: save only when asked")
    parser.add_argument("--save-only-model", action="store_true")
    parser.add_argument("--save-total-limit", type=int, default=None,
                        help="HF's rotation: older checkpoint-N/ folders are deleted")
    parser.add_argument("--load-best", action="store_true",
                        help="evaluate and save every --save-steps, load_best_model_at_end by "
                             "eval_loss, then save the delivered model to OUTPUT_DIR/final")
    parser.add_argument("--best-is-greater", action="store_true",
                        help="with --load-best: greater_is_better=True, so the best is an "
                             "early checkpoint (eval_loss falls as it learns)")
    parser.add_argument("--nan-at", type=int, default=None)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--no-callback", action="store_true",
                        help="plain HF, no itera callback (the [checkpoint] watch case)")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=VOCAB,
                                       n_positions=LENGTH, bos_token_id=0, eos_token_id=0))
    training_args = TrainingArguments(
        output_dir=args.output_dir, max_steps=args.steps, per_device_train_batch_size=8,
        learning_rate=5e-3, lr_scheduler_type="linear", logging_steps=1,
        save_strategy="steps" if args.save_steps else "no", save_steps=args.save_steps or 500,
        save_only_model=args.save_only_model, save_total_limit=args.save_total_limit,
        **({"eval_strategy": "steps", "eval_steps": args.save_steps,
            "load_best_model_at_end": True, "metric_for_best_model": "eval_loss",
            "greater_is_better": args.best_is_greater} if args.load_best else {}),
        report_to=[], use_cpu=True, disable_tqdm=True,
        dataloader_num_workers=0, seed=0)
    trainer = Trainer(model=model, args=training_args, train_dataset=Sequences(),
                      eval_dataset=Sequences() if args.load_best else None,
                      callbacks=[Pace(args.sleep, args.nan_at)]
                      + ([] if args.no_callback else [IteraCallback()]))
    trainer.train(resume_from_checkpoint=resume_from())
    if args.load_best:
        trainer.save_model(f"{training_args.output_dir}/final")  # the model it delivers


if __name__ == "__main__":
    main()
