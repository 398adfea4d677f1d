"""The demo campaign's data check: pinned hashes and truncated inputs.

Why it exists: a decision is only worth something on the corpus it claims, so
before any training the files are checked against the sha256 pinned in
``campaign.toml``; a missing or changed file fails loudly (exit 1).  It also
counts examples longer than ``--max-len`` and reports them through the SDK as
``truncated``: the engine's truncation rule, not this script, decides whether
that count is acceptable.

    python -m tui.demo.data_check --max-len 64 tui/demo/data/train.jsonl=<sha256> ...
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

from tui import training


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tui.demo.data_check",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--max-len", type=int, required=True)
    parser.add_argument("pins", nargs="+", metavar="FILE=SHA256")
    args = parser.parse_args(argv)
    for pin in args.pins:
        if "=" not in pin:
            parser.error(f"{pin!r}: expected FILE=SHA256")
    return args


def check_file(path: Path, expected: str) -> tuple[dict, str | None]:
    """The file's record for the event, and a problem sentence or None."""
    record = {"path": str(path), "expected": expected, "sha256": None, "ok": False}
    if not path.is_file():
        return record, f"{path}: missing (expected sha256 {expected})"
    record["sha256"] = hashlib.sha256(path.read_bytes()).hexdigest()
    if record["sha256"] != expected.lower():
        return record, (f"{path}: sha256 mismatch: expected {expected}, "
                        f"got {record['sha256']} (the corpus changed; re-pin it only on purpose)")
    record["ok"] = True
    return record, None


def count_long(path: Path, max_len: int) -> tuple[int, int]:
    """(examples, examples longer than max_len) in one JSONL file."""
    examples = longer = 0
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                examples += 1
                longer += len(json.loads(line)["tokens"]) > max_len
    return examples, longer


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    run = training.attach()
    records, problems = [], []
    for pin in args.pins:
        name, _, expected = pin.rpartition("=")
        record, problem = check_file(Path(name), expected.strip())
        records.append(record)
        if problem:
            problems.append(problem)
    if problems:
        run.event("data_check", ok=False, files=records, problems=problems)
        for problem in problems:
            print(f"data check FAILED: {problem}", file=sys.stderr)
        return 1
    examples = truncated = 0
    for record in records:
        n, longer = count_long(Path(record["path"]), args.max_len)
        record.update(examples=n, truncated=longer)
        examples, truncated = examples + n, truncated + longer
    run.log(0, truncated=truncated, examples=examples)
    run.event("data_check", ok=True, files=records)
    print(f"data check ok: {len(records)} files match their pinned sha256; {examples} "
          f"examples, {truncated} longer than {args.max_len} tokens (would be truncated)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
