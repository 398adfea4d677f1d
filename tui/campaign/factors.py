"""What a variant's factors are called: command options, params, and their usual aliases.

A factor is a parameter or a command option, named without its leading dashes
and with `-` read as `_` (`--hidden-size` and the param `hidden_size` are one
factor). Positional arguments are `argv[0]`, `argv[1]`, ...; an option
followed by a non-option takes it as its value, otherwise it is a flag
(`"true"`).

The factors fine-tunes vary go by several names across TRL, PEFT, axolotl,
LLaMA-Factory and scripts' own options; each is one factor under one name:
`rank` (`r`, `lora_r`, `lora_rank`), `alpha` (`lora_alpha`), `lr`
(`learning_rate`), `max_length` (`max_seq_length`, `cutoff_len`,
`sequence_len`) and `precision` (`bf16`/`fp16` flags, `torch_dtype`/`dtype`,
Lightning's `precision`, read as `bf16`, `fp16`, `fp32`...). A one-letter
`-r` is a short option, not the rank.

What starts the script is not a factor (`script_argv`): `python -u`,
`env VAR=...`, `torchrun --nproc_per_node 2`, `python -m torch.distributed.run`,
`accelerate launch --num_processes 2`, `deepspeed` only launch it (a GPU count
is the `gpus` factor), so a command's factors are read from the script (or
`-m module`) on, and `argv[0]` is the script.
Stdlib only.
"""

from __future__ import annotations

import re
from posixpath import basename
from typing import Any

# one factor, several spellings: the name on the right is the one the check shows
FACTOR_ALIASES = {
    "r": "rank", "lora_r": "rank", "lora_rank": "rank", "rank": "rank",
    "lora_alpha": "alpha", "alpha": "alpha",
    "learning_rate": "lr", "lr": "lr",
    "max_length": "max_length", "max_seq_length": "max_length", "max_seq_len": "max_length",
    "cutoff_len": "max_length", "sequence_len": "max_length",
}
# spellings of the numeric precision, folded into the one `precision` factor
PRECISION_KEYS = ("bf16", "fp16", "torch_dtype", "dtype", "precision")
_PRECISION_WORDS = {"bfloat16": "bf16", "torch.bfloat16": "bf16", "bf16": "bf16",
                    "float16": "fp16", "torch.float16": "fp16", "half": "fp16", "fp16": "fp16",
                    "16": "fp16", "16-mixed": "fp16-mixed", "float32": "fp32", "fp32": "fp32",
                    "torch.float32": "fp32", "32": "fp32", "32-true": "fp32"}


def factor_name(name: str) -> str:
    plain = name.lstrip("-").replace("-", "_")
    if len(name) == 2 and name.startswith("-") and name[1] != "-":
        return plain  # a short option (-r): its meaning is the script's own
    return FACTOR_ALIASES.get(plain.lower(), plain)


def _truthy(value: Any) -> bool:
    return value is True or str(value).lower() in ("true", "1", "yes")


def fold_precision(out: dict[str, tuple[str, Any]]) -> None:
    """bf16/fp16 flags, torch_dtype, dtype, precision: one `precision` factor."""
    found = {key: out.pop(key) for key in PRECISION_KEYS if key in out}
    if not found:
        return
    words = []
    for key, (_, value) in found.items():
        if key in ("bf16", "fp16"):
            if _truthy(value):
                words.append(key)
        elif value is not None:
            text = str(value).lower()
            words.append(_PRECISION_WORDS.get(text, text))
    wheres = {where for where, _ in found.values()}
    where = "params+command" if len(wheres) > 1 or "params+command" in wheres \
        else next(iter(wheres))
    if words:
        out["precision"] = (where, "+".join(dict.fromkeys(words)))


def _is_option(token: str) -> bool:
    return token.startswith("-") and len(token) > 1 and not _number(token)


def _number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def command_factors(argv: tuple[str, ...] | list[str]) -> dict[str, str]:
    """Options as `name -> value` ("true" for a flag), positionals as `argv[i]`."""
    out: dict[str, str] = {}
    i, position = 0, 0
    while i < len(argv):
        token = argv[i]
        if _is_option(token):
            if "=" in token:
                name, value = token.split("=", 1)
            elif i + 1 < len(argv) and not _is_option(argv[i + 1]):
                name, value = token, argv[i + 1]
                i += 1
            else:
                name, value = token, "true"
            key = factor_name(name)
            out[key] = f"{out[key]},{value}" if key in out else value
        else:
            out[f"argv[{position}]"] = token
            position += 1
        i += 1
    return out


PYTHON = re.compile(r"^python[\d.]*$")
PYTHON_VALUE_OPTIONS = ("-W", "-X", "-Q")
LAUNCHER_PROGRAMS = ("torchrun", "deepspeed")
LAUNCHER_MODULES = ("torch.distributed.run", "torch.distributed.launch",
                    "accelerate.commands.launch", "deepspeed")
ENV_VALUE_OPTIONS = ("-u", "--unset", "-C", "--chdir", "-S", "--split-string")


def _launcher_options(argv, i: int) -> int:
    """Past a launcher's own options (`--nproc_per_node 2`, `--standalone`): the index
    of the script, or of `-m` (an option's value is a token that is neither an option
    nor a `.py` file)."""
    n = len(argv)
    while i < n and argv[i].startswith("-") and argv[i] not in ("-m", "--module"):
        token = argv[i]
        i += 1
        if "=" not in token and i < n and not argv[i].startswith("-") \
                and not argv[i].endswith(".py"):
            i += 1
    return i


def past_env(argv, i: int = 0) -> int:
    """The index past an `env [-u NAME] VAR=value ...` prefix at `i` (`i` itself when
    there is none): what `env` starts is the command."""
    n = len(argv)
    if i < n and basename(argv[i]) == "env":
        i += 1
        while i < n and (argv[i].startswith("-") or "=" in argv[i]):
            i += 2 if argv[i] in ENV_VALUE_OPTIONS else 1
    return i


def script_argv(argv) -> tuple[str, ...]:
    """The command from the script (or `-m module`) on: the launchers before it
    (`env VAR=...`, python and its options, torchrun, accelerate launch, deepspeed,
    python -m torch.distributed.run) start it and change nothing it computes."""
    argv, i, n = tuple(argv), 0, len(argv)
    while i < n:
        program = basename(argv[i])
        if program == "env":
            i = past_env(argv, i)
        elif program == "accelerate" and i + 1 < n and argv[i + 1] == "launch":
            i = _launcher_options(argv, i + 2)
        elif program in LAUNCHER_PROGRAMS:
            i = _launcher_options(argv, i + 1)
        elif PYTHON.match(program):
            i += 1
            while i < n and argv[i].startswith("-") and argv[i] not in ("-m", "-c", "-"):
                i += 2 if argv[i] in PYTHON_VALUE_OPTIONS else 1
            if i + 1 < n and argv[i] == "-m" and argv[i + 1] in LAUNCHER_MODULES:
                i = _launcher_options(argv, i + 2)
            else:
                return argv[i:]
        else:
            return argv[i:]
        if i < n and argv[i] in ("-m", "--module"):
            return ("-m",) + argv[i + 1:]  # a launcher's module mode: python -m's spelling
    return argv[i:]
