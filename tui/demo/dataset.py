"""Loading the demo corpus into tensors, and a resumable batch order.

Why it exists: a resumed run must reproduce the uninterrupted losses bitwise,
so the order in which examples are drawn cannot come from a global RNG that
drifts; ``BatchOrder`` derives each epoch's permutation from (seed, epoch) and
its whole position fits in a small ``data_state`` dict saved in checkpoints.
Truncation keeps the first ``max_len`` tokens, which in this corpus cuts off
the segment that decides the label: the count is reported, never hidden.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import torch

DATA_DIR = Path(__file__).resolve().parent / "data"


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


@dataclass(frozen=True)
class Split:
    ids: list[str]
    tokens: torch.Tensor  # (n, max_len) int64, 0-padded on the right
    lengths: torch.Tensor  # (n,) tokens kept, >= 1
    full_lengths: list[int]  # before truncation
    labels: torch.Tensor  # (n,)

    @property
    def truncated(self) -> int:
        return sum(1 for n, kept in zip(self.full_lengths, self.lengths.tolist()) if n > kept)


def encode(examples: list[dict], max_len: int) -> Split:
    tokens = torch.zeros(len(examples), max_len, dtype=torch.long)
    lengths = []
    for row, example in enumerate(examples):
        kept = example["tokens"][:max_len]
        tokens[row, : len(kept)] = torch.tensor(kept, dtype=torch.long)
        lengths.append(max(len(kept), 1))
    return Split(
        ids=[e["id"] for e in examples],
        tokens=tokens,
        lengths=torch.tensor(lengths, dtype=torch.long),
        full_lengths=[len(e["tokens"]) for e in examples],
        labels=torch.tensor([e["label"] for e in examples], dtype=torch.long),
    )


def load(data_dir: Path, max_len: int) -> tuple[Split, Split]:
    return (encode(read_jsonl(data_dir / "train.jsonl"), max_len),
            encode(read_jsonl(data_dir / "val.jsonl"), max_len))


class BatchOrder:
    """Shuffled batches, epoch after epoch; the position is (epoch, pos)."""

    def __init__(self, size: int, batch_size: int, seed: int):
        self.size, self.batch_size, self.seed = size, batch_size, seed
        self.epoch, self.pos = 0, 0
        self._perm = self._permutation()

    def _permutation(self) -> torch.Tensor:
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        return torch.randperm(self.size, generator=generator)

    def next(self) -> torch.Tensor:
        if self.pos + self.batch_size > self.size:
            self.epoch, self.pos = self.epoch + 1, 0
            self._perm = self._permutation()
        batch = self._perm[self.pos : self.pos + self.batch_size]
        self.pos += self.batch_size
        return batch

    def state(self) -> dict:
        return {"seed": self.seed, "epoch": self.epoch, "pos": self.pos,
                "batch_size": self.batch_size, "size": self.size}

    def restore(self, state: dict) -> None:
        if (state.get("seed"), state.get("batch_size"), state.get("size")) != (
                self.seed, self.batch_size, self.size):
            raise ValueError(f"checkpoint data state {state} does not match this run "
                             f"(seed {self.seed}, batch {self.batch_size}, {self.size} examples)")
        self.epoch, self.pos = int(state["epoch"]), int(state["pos"])
        self._perm = self._permutation()
