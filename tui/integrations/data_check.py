"""`python -m tui.integrations.data_check`: the truncation a trainer does silently, counted first.

TRL's `SFTTrainer` (and most fine-tuning scripts) cut every example longer
than `max_length` without a word, so a variant with a shorter max length
trains on less of the corpus: a cause the ablation must show, and, for an
indispensable input, a reason to stop. This data check, a `[[step]]` with
`kind = "data_check"`, runs before the pilots:

1. every pinned `[corpus]` file is checked against its sha256 (exit 1 when
   one is missing or changed);
2. the tokenizer of the campaign's base (`--tokenizer`, else the control's
   `--base` / `--model_name_or_path` / `base_model` param) tokenises every
   example (`text`, or `prompt` + `completion`, or the `messages` contents of a
   JSONL line; a line of a text file);
3. per variant, the examples longer than its max length (`max_length`,
   `max_seq_length`, `cutoff_len`... read as the ablation check reads them,
   else `[corpus] max_len`) are counted.

The counts go to the run's metrics: `truncated` (the largest count over the
mandatory variants: what the `truncation` rule reads, `max = 0` to stop on
any), `truncated_<variant>` each, and a `data_check` event with the table;
`data_check.json` in the run directory keeps it for the bundle's report.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from ..campaign.ablation import config_factors
from ..campaign.finetune_files import DATA_CHECK_FILE as RESULT_FILE

BASE_FACTORS = ("base", "base_model", "model_name_or_path", "pretrained_model_name_or_path",
                "model_id", "model")


@dataclass(frozen=True)
class VariantCount:
    """One variant's truncation: its max length and how many examples exceed it."""

    variant: str
    category: str
    max_length: int | None
    longer: int | None  # None: no max length known for this variant
    examples: int


def _texts(path: Path, field: str) -> list[str]:
    out = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            if path.suffix not in (".jsonl", ".json"):
                out.append(line.rstrip("\n"))
                continue
            row = json.loads(line)
            if isinstance(row.get(field), str):
                out.append(row[field])
            elif isinstance(row.get("prompt"), str):
                out.append(row["prompt"] + str(row.get("completion") or ""))
            elif isinstance(row.get("messages"), list):
                out.append("\n".join(str(m.get("content", "")) for m in row["messages"]
                                     if isinstance(m, dict)))
            else:
                raise ValueError(f"{path.name}: a line with no {field!r}, prompt or messages")
    return out


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _int(value) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def max_lengths(plan) -> dict[str, int | None]:
    """variant id -> its max length, as its command or params say (else `[corpus] max_len`)."""
    default = plan.corpus.max_len if plan.corpus else None
    out = {}
    for v in plan.variants:
        where_value = config_factors(v).get("max_length")
        out[v.id] = _int(where_value[1]) if where_value else default
    return out


def base_of(plan) -> str | None:
    """The control's base model as its command or params name it."""
    control = next((v for v in plan.variants if v.id == plan.campaign.control), None)
    factors = config_factors(control) if control else {}
    for name in BASE_FACTORS:
        if name in factors and isinstance(factors[name][1], str):
            return factors[name][1]
    return None


def count(plan, lengths: list[int]) -> list[VariantCount]:
    limits = max_lengths(plan)
    return [VariantCount(v.id, v.category, limits[v.id],
                         None if limits[v.id] is None else sum(n > limits[v.id] for n in lengths),
                         len(lengths)) for v in plan.variants]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.integrations.data_check",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--campaign", default="campaign.toml", help="the campaign file")
    parser.add_argument("--tokenizer", help="tokenizer folder or hub id (default: the "
                        "control's base)")
    parser.add_argument("--field", default="text", help="the JSONL field holding the text")
    args = parser.parse_args(argv)

    from .. import training
    from ..campaign import load_plan
    from ..campaign import PlanError

    try:
        plan = load_plan(Path(args.campaign))
    except PlanError as error:
        print(f"data check: {error}", file=sys.stderr)
        return 2
    run = training.attach()
    if plan.corpus is None or not plan.corpus.files:
        print("data check: the campaign pins no [corpus] files", file=sys.stderr)
        return 2
    root = plan.root / plan.corpus.root
    files, problems = [], []
    for rel, pinned in plan.corpus.files:
        path = root / rel
        actual = _sha256(path) if path.is_file() else None
        files.append({"path": rel, "sha256": actual, "pinned": pinned,
                      "ok": actual == pinned.lower()})
        if actual is None:
            problems.append(f"{rel}: missing (pinned sha256 {pinned})")
        elif actual != pinned.lower():
            problems.append(f"{rel}: sha256 {actual} is not the pinned {pinned}")
    if problems:
        for line in problems:
            print(f"data check: {line}", file=sys.stderr)
        run.event("data_check", ok=False, files=files, problems=problems)
        return 1
    name = args.tokenizer or base_of(plan)
    if not name:
        print("data check: no tokenizer: pass --tokenizer, or give the control a --base "
              "option or a base_model param", file=sys.stderr)
        return 2
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(name)
    texts = [t for rel, _ in plan.corpus.files for t in _texts(root / rel, args.field)]
    lengths = [len(ids) for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]]
    counts = count(plan, lengths)
    mandatory = [c.longer for c in counts if c.category == "mandatory" and c.longer is not None]
    values = {"truncated": max(mandatory) if mandatory else 0, "examples": len(lengths)}
    values |= {f"truncated_{c.variant}": c.longer for c in counts if c.longer is not None}
    run.log(0, **values)
    table = [asdict(c) for c in counts]
    run.event("data_check", ok=True, files=files, tokenizer=name, variants=table)
    (run.run_dir / RESULT_FILE).write_text(json.dumps(
        {"tokenizer": name, "examples": len(lengths), "files": files, "variants": table},
        indent=2) + "\n")
    for c in counts:
        limit = "no max length" if c.max_length is None else f"max length {c.max_length}"
        longer = "-" if c.longer is None else f"{c.longer} of {c.examples} examples longer"
        print(f"{c.variant} ({c.category}, {limit}): {longer}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
