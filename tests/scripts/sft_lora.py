"""A TRL `SFTTrainer` + PEFT LoRA script, as people write it, with the one-line callback.

The base is a local folder (`--base`, a tiny GPT-2 and its tokenizer saved with
`save_pretrained`, or a hub id served from the local cache); the corpus is a
JSONL file of `{"text": ...}` lines, tokenised here with the base's tokenizer
and handed to `SFTTrainer`, which truncates what is longer than `max_length`
without a word. At the end: `trainer.evaluate()` (its `eval_loss` is logged)
and `trainer.save_model(--out)`, the adapter. `--nan-lr-at K` makes the
learning rate NaN from step K on (torch refuses a NaN learning rate up front). `--no-callback` is the same script unchanged
by itera-tui (the `hf_trainer` preset case).
"""

import argparse
import json
import time

import torch
from datasets import Dataset
from peft import LoraConfig
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
from trl import SFTConfig, SFTTrainer


class Pace(TrainerCallback):
    """Test hooks: slow steps down; make the learning rate NaN from a step on."""

    def __init__(self, sleep: float, nan_lr_at: int | None):
        self.sleep, self.nan_lr_at = sleep, nan_lr_at

    def on_step_begin(self, args, state, control, optimizer=None, lr_scheduler=None,
                      **kwargs):
        if self.nan_lr_at is not None and state.global_step + 1 >= self.nan_lr_at:
            for group in optimizer.param_groups:  # a schedule gone wrong
                group["lr"] = float("nan")
            lr_scheduler.base_lrs = [float("nan")] * len(lr_scheduler.base_lrs)

    def on_step_end(self, args, state, control, **kwargs):
        if self.sleep:
            time.sleep(self.sleep)


def rows(path: str, tokenizer) -> Dataset:
    texts = [json.loads(line)["text"] for line in open(path, encoding="utf-8") if line.strip()]
    return Dataset.from_list([{"input_ids": tokenizer(t)["input_ids"]} for t in texts])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--base", default="base")
    parser.add_argument("--revision", default=None)
    parser.add_argument("--train", default="data/train.jsonl")
    parser.add_argument("--eval", default="data/eval.jsonl")
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument("--lr", type=float, default=5e-3)
    parser.add_argument("--max-length", type=int, default=24)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--output-dir", default="sft-out")
    parser.add_argument("--out", default="adapter")
    parser.add_argument("--save-steps", type=int, default=0)
    parser.add_argument("--sleep", type=float, default=0.0)
    parser.add_argument("--nan-lr-at", type=int, default=None)
    parser.add_argument("--no-callback", action="store_true")
    args = parser.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(args.base, revision=args.revision)
    model = AutoModelForCausalLM.from_pretrained(args.base, revision=args.revision)
    train, evaluation = rows(args.train, tokenizer), rows(args.eval, tokenizer)
    config = SFTConfig(
        output_dir=args.output_dir, max_steps=args.steps, per_device_train_batch_size=8,
        per_device_eval_batch_size=len(evaluation), learning_rate=args.lr,
        max_length=args.max_length, logging_steps=1, report_to=[], use_cpu=True,
        save_strategy="steps" if args.save_steps else "no", save_steps=args.save_steps or 500,
        disable_tqdm=True, seed=0, data_seed=0, dataloader_num_workers=0, bf16=False)
    callbacks = [Pace(args.sleep, args.nan_lr_at)]
    if not args.no_callback:
        from tui.integrations.hf import IteraCallback

        callbacks.append(IteraCallback())
    trainer = SFTTrainer(
        model=model, args=config, train_dataset=train, eval_dataset=evaluation,
        processing_class=tokenizer, callbacks=callbacks,
        peft_config=LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.0,
                               target_modules=["c_attn"], fan_in_fan_out=True,
                               task_type="CAUSAL_LM", revision=args.revision))
    from tui.integrations import resume_from

    trainer.train(resume_from_checkpoint=resume_from())
    trainer.evaluate()
    trainer.save_model(args.out)


if __name__ == "__main__":
    main()
