"""The demo classifier: token embedding, one GRU, mean + last state, linear head.

Why it exists: small enough to train on one CPU core in well under a minute,
yet it must read order (the label is the last segment's topic), which a
bag-of-tokens model cannot.  Kept apart from the training loop so a bundle's
reload check can rebuild it from an artifact's meta alone (``from_meta``).
"""

from __future__ import annotations

import torch
from torch import nn


class TopicGRU(nn.Module):
    def __init__(self, vocab_size: int, num_classes: int, hidden: int, embed: int = 32):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, embed, padding_idx=0)
        self.gru = nn.GRU(embed, hidden, batch_first=True)
        self.head = nn.Linear(2 * hidden, num_classes)

    def forward(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        width = int(lengths.max())
        outputs, _ = self.gru(self.embedding(tokens[:, :width]))
        # Right padding never influences earlier positions, so no packing needed.
        mask = (torch.arange(width)[None, :] < lengths[:, None]).unsqueeze(-1)
        mean = (outputs * mask).sum(1) / lengths[:, None]
        last = outputs[torch.arange(len(lengths)), lengths - 1]
        return self.head(torch.cat([mean, last], dim=1))


def from_meta(meta: dict) -> TopicGRU:
    """Rebuild an untrained model with the shape recorded in an artifact's meta."""
    return TopicGRU(meta["vocab_size"], meta["num_classes"], meta["hidden"], meta["embed"])
