"""A Hugging Face Trainer run that only prints, whose weights go NaN at step 15.

Usage: hf_nan_print.py [--steps N] [--nan-at K] [--logging-steps N] [--sleep S]
A 1-layer GPT-2 built from a config (nothing is downloaded) trains on random
tokens made here. The Trainer prints its log dicts to stdout
(`{'loss': '3.894', 'grad_norm': '0.861', ...}`) and its tqdm bar to stderr,
with its default `logging_nan_inf_filter=True`: once the weights are NaN the
printed loss is a finite stand-in and only `grad_norm` / `eval_loss` say `nan`.
A callback fills every weight with NaN at the end of step K. No SDK, no
TensorBoard: what `[metrics] preset = "hf_trainer"` must read. Honours
ITERA_MAX_STEPS (the pilot's bound) and writes `model.txt` into ITERA_RUN_DIR
at a normal end, so a run that trained into NaN still exits 0 with its files.
"""

import argparse
import os
import time

import torch
from transformers import (GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback,
                          TrainingArguments)

p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=40)
p.add_argument("--nan-at", type=int, default=15)
p.add_argument("--logging-steps", type=int, default=5)
p.add_argument("--sleep", type=float, default=0.0)
args = p.parse_args()
steps = int(os.environ.get("ITERA_MAX_STEPS") or args.steps)
run_dir = os.environ.get("ITERA_RUN_DIR", ".")


class RandomTokens(torch.utils.data.Dataset):
    def __len__(self):
        return 64

    def __getitem__(self, i):
        ids = torch.randint(0, 64, (16,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


class NanWeights(TrainerCallback):
    def on_step_end(self, training_args, state, control, model=None, **kwargs):
        if state.global_step == args.nan_at:
            with torch.no_grad():
                for weight in model.parameters():
                    weight.fill_(float("nan"))
        time.sleep(args.sleep)


torch.manual_seed(0)
model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64,
                                   n_positions=32))
training_args = TrainingArguments(
    output_dir=os.path.join(run_dir, "hf_out"), max_steps=steps,
    per_device_train_batch_size=4, per_device_eval_batch_size=8,
    logging_steps=args.logging_steps, eval_strategy="steps", eval_steps=10,
    save_strategy="no", report_to=[], use_cpu=True, seed=0)
Trainer(model=model, args=training_args, train_dataset=RandomTokens(),
        eval_dataset=RandomTokens(), callbacks=[NanWeights()]).train()
with open(os.path.join(run_dir, "model.txt"), "w") as f:
    f.write("trained\n")
