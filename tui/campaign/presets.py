"""`[metrics] preset = ...`: what well-known training code really prints.

A user running code nobody here wrote should not have to write a regex for
the Hugging Face Trainer, a Lightning progress bar, the pytorch/examples
scripts or nanoGPT. Each preset is the set of patterns for that code's own
printed format (checked against transformers 5.x, lightning 2.6, the
pytorch/examples and karpathy/nanoGPT sources) and the metrics `non_finite`
watches for it when a rule names none. The patterns are matched against
segments of stdout and stderr with ANSI escapes removed (see
`tui.engine.reading.segments`); `step_total` is the total a printed step counts
towards, which lets the engine derive a global step (see `tui.engine.reading.printed`).

User patterns add to a preset's or replace them name by name.
"""

from __future__ import annotations

from dataclasses import dataclass

from .plan import MetricPattern, MetricsSpec, PairPattern

NAME = r"[A-Za-z_][\w/.@-]*"  # a metric name as frameworks print it: train_loss, train/loss


@dataclass(frozen=True)
class Preset:
    """The patterns a framework's printed output needs (`[metrics] preset`)."""
    name: str
    patterns: tuple[MetricPattern, ...]
    pairs: tuple[PairPattern, ...] = ()
    aliases: tuple[tuple[str, tuple[str, ...]], ...] = ()
    watch: tuple[str, ...] = ("loss",)


def _p(name: str, pattern: str) -> MetricPattern:
    return MetricPattern(name, pattern)


# transformers Trainer: `{'loss': '2.972', 'grad_norm': '1.779', ...}` (5.x quotes the values,
# 4.x does not) on stdout, and the tqdm bar ` 33%|███▎ | 10/30 [00:00<00:00, 313.10it/s]`
# on stderr whose count is the global step. logging_nan_inf_filter (on by default) prints a
# NaN loss as a finite number, so grad_norm and eval_loss are watched too.
HF_TRAINER = Preset(
    "hf_trainer",
    patterns=(
        _p("step", r"^\s*\d+%\|[^|]*\|\s*(\d+)/\d+ \["),
        _p("step_total", r"^\s*\d+%\|[^|]*\|\s*\d+/(\d+) \["),
    ),
    pairs=(PairPattern(within=r"^\s*\{(.*)\}\s*$", pair=rf"'({NAME})': '?([^',}}\s]+)"),),
    watch=("loss", "grad_norm", "eval_loss"),
)

# Lightning: the TQDM bar `Epoch 0:  45%|████▌ | 45/100 [00:01<00:02, 30.2it/s, v_num=0,
# train_loss=0.410]` (a NaN shows as `nan.0`) and the Rich bar `Epoch 0/1 ━━╸━ 2/8 0:00:00 •
# 0:00:01 593.37it/s train_loss: 5.690` (one more metric per continuation line; a Trainer
# given `max_steps` without `max_epochs` draws `Epoch 0/-2`). The count restarts every
# epoch; the bar's total makes the global step exact.
LIGHTNING = Preset(
    "lightning",
    patterns=(
        _p("step", r"^Epoch \d+\S*\s.*?\s(\d+)/(?:\d+|\?)(?:\s|$)"),
        _p("step_total", r"^Epoch \d+\S*\s.*?\s\d+/(\d+)(?:\s|$)"),
        _p("epoch", r"^Epoch (\d+)"),
    ),
    pairs=(
        PairPattern(within=r"^Epoch \d+:.*?\[[^\]]*?(?:it/s|s/it), (.*)\]\s*$",
                    pair=rf"({NAME})=([^,\s\]]+)", ignore=("v_num",)),
        PairPattern(within=rf"^(?:Epoch \d+/-?\d+\s.*?(?:it/s|s/it)|\s+)((?:\s*{NAME}: \S+)+)\s*$",
                    pair=rf"({NAME}): (\S+)", ignore=("v_num",)),
    ),
    aliases=(("loss", ("train_loss", "train_loss_step", "train/loss")),),
    watch=("loss", "val_loss"),
)

# pytorch/examples: word_language_model (`| epoch   1 |   200/ 2983 batches | lr 20.00 |
# ms/batch 5.00 | loss  6.92 | ppl  1012.32`, `| end of epoch 1 | ... | valid loss  5.58 |`),
# imagenet (`Epoch: [0][  10/5005]\tTime ...\tLoss 6.9e+00 (6.9e+00)\tAcc@1 0.00 ( 0.00)`)
# and mnist (`Train Epoch: 1 [640/60000 (1%)]\tLoss: 2.300000`, whose count is samples, so
# it gives no step; `Test set: Average loss: 0.0500, Accuracy: 9839/10000 (98%)`).
PYTORCH_EXAMPLES = Preset(
    "pytorch_examples",
    patterns=(
        _p("step", r"\|\s*(\d+)/\s*\d+ batches \|"),
        _p("step_total", r"\|\s*\d+/\s*(\d+) batches \|"),
        _p("step", r"^Epoch: \[\d+\]\[\s*(\d+)/\d+\]"),
        _p("step_total", r"^Epoch: \[\d+\]\[\s*\d+/(\d+)\]"),
        _p("epoch", r"^\| (?:end of )?epoch\s+(\d+) \|"),
        _p("epoch", r"^Epoch: \[(\d+)\]"),
        _p("epoch", r"^Train Epoch: (\d+) "),
        _p("lr", r"\| lr (\S+) \|"),
        _p("ms_per_batch", r"\| ms/batch\s+(\S+) \|"),
        _p("loss", r"\| loss\s+(\S+) \|"),
        _p("loss", r"^Epoch: \[.*\tLoss (\S+) \("),
        _p("loss", r"^Train Epoch: .*\tLoss: (\S+)"),
        _p("ppl", r"\| loss .*\| ppl\s+(\S+)"),
        _p("val_loss", r"\| valid loss\s+(\S+) \|"),
        _p("val_ppl", r"\| valid ppl\s+(\S+)"),
        _p("test_loss", r"\| test loss\s+(\S+) \|"),
        _p("test_loss", r"^Test set: Average loss: (\S+),"),
        _p("test_ppl", r"\| test ppl\s+(\S+)"),
        _p("test_acc", r"^Test set: .*Accuracy: \d+/\d+ \((\S+)%\)"),
        _p("acc1", r"^Epoch: \[.*\tAcc@1\s+(\S+) \("),
        _p("val_acc1", r"^ \* Acc@1 (\S+) "),
    ),
    watch=("loss", "val_loss", "test_loss"),
)

# nanoGPT: `iter 100: loss 2.3456, time 12.34ms, mfu 1.23%` every log_interval and
# `step 250: train loss 1.2300, val loss 1.4500` every eval_interval; both count globally.
NANOGPT = Preset(
    "nanogpt",
    patterns=(
        _p("step", r"^(?:iter|step) (\d+):"),
        _p("loss", r"^iter \d+: loss (\S+),"),
        _p("time_ms", r"^iter \d+: .*time (\S+)ms"),
        _p("mfu", r"^iter \d+: .*mfu (\S+)%"),
        _p("train_loss", r"^step \d+: train loss (\S+),"),
        _p("val_loss", r"^step \d+: .*val loss (\S+)"),
    ),
    watch=("loss", "train_loss", "val_loss"),
)

PRESETS = {p.name: p for p in (HF_TRAINER, LIGHTNING, PYTORCH_EXAMPLES, NANOGPT)}
STEP_NAMES = ("step", "step_total")  # a user `step` replaces the preset's whole step reading


def build_spec(preset: str | None, user: tuple[MetricPattern, ...] = (),
               tensorboard: str | None = None,
               tags: tuple[tuple[str, str], ...] = ()) -> MetricsSpec:
    """The preset's patterns, minus every name the user gives, plus the user's."""
    base = PRESETS[preset] if preset else None
    mine = {p.name for p in user}
    if "step" in mine:
        mine.update(STEP_NAMES)
    kept = tuple(p for p in (base.patterns if base else ()) if p.name not in mine)
    return MetricsSpec(preset=preset, patterns=kept + tuple(user),
                       pairs=base.pairs if base else (),
                       aliases=base.aliases if base else (),
                       watch=base.watch if base else ("loss",),
                       tensorboard=tensorboard, tags=tuple(tags))
