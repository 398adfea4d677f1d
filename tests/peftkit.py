"""A tiny causal LM base and LoRA adapters, built here, nothing downloaded.

The base is a one-layer GPT-2 built from a config, with a word-level tokenizer
trained on the test corpus with the `tokenizers` library, saved with
`save_pretrained` to a local folder: what a person gets from `from_pretrained`,
small enough to train and reload in seconds on a busy 2-core box. The fake hub
cache is huggingface_hub's own layout (`models--org--name/snapshots/<commit>/`,
`refs/main`), so the code under test reads it as it reads a real one.
"""

from __future__ import annotations

import shutil
from pathlib import Path

WORDS = ("the cat sat on a mat while dogs ran far away from home and birds sang "
         "songs of rain over hills").split()


def corpus_lines(n: int, long_every: int = 0, long_words: int = 40, short_words: int = 6):
    """n example texts; every `long_every`-th one has `long_words` words (0: none)."""
    out = []
    for i in range(n):
        size = long_words if long_every and i % long_every == long_every - 1 else short_words
        out.append(" ".join(WORDS[(i + j) % len(WORDS)] for j in range(size)))
    return out


def build_tokenizer(folder: Path, texts: list[str]):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    raw = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    raw.pre_tokenizer = pre_tokenizers.Whitespace()
    raw.train_from_iterator(texts, trainers.WordLevelTrainer(
        special_tokens=["[PAD]", "[UNK]", "[EOS]"]))
    tok = PreTrainedTokenizerFast(tokenizer_object=raw, unk_token="[UNK]", pad_token="[PAD]",
                                  eos_token="[EOS]", bos_token="[EOS]")
    tok.save_pretrained(folder)
    return tok


def build_base(folder: Path, texts: list[str] | None = None, seed: int = 0) -> Path:
    """A one-layer GPT-2 and its tokenizer saved to `folder`."""
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    tok = build_tokenizer(folder, texts or corpus_lines(40))
    torch.manual_seed(seed)
    config = GPT2Config(n_layer=1, n_head=2, n_embd=32, n_positions=128,
                        vocab_size=len(tok), bos_token_id=tok.eos_token_id,
                        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    GPT2LMHeadModel(config).save_pretrained(folder)
    return folder


def make_adapter(base: Path, out: Path, r: int = 4, nan: bool = False,
                 base_name: str | None = None) -> Path:
    """A LoRA adapter of `base` saved to `out`; `base_name`: what its config names."""
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(base)
    model = get_peft_model(model, LoraConfig(r=r, lora_alpha=2 * r, target_modules=["c_attn"],
                                             task_type="CAUSAL_LM", fan_in_fan_out=True))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.fill_(float("nan") if nan else 0.01)
    model.save_pretrained(out)
    if base_name is not None:
        import json

        config = json.loads((out / "adapter_config.json").read_text())
        config["base_model_name_or_path"] = base_name
        (out / "adapter_config.json").write_text(json.dumps(config, indent=2))
    return out


def fake_hub_cache(cache: Path, repo: str, base: Path, commit: str = "a" * 40) -> str:
    """`base` copied into a huggingface_hub cache layout under `cache`; its commit."""
    root = cache / ("models--" + repo.replace("/", "--"))
    shutil.copytree(base, root / "snapshots" / commit)
    (root / "refs").mkdir(parents=True)
    (root / "refs" / "main").write_text(commit)
    return commit
