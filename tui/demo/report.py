"""The demo run's deliverables: predictions and an error analysis.

Why it exists: the campaign buys a decision, and a decision needs more than
one accuracy figure: every validation prediction with its confidence, the
confusion matrix, the most confident mistakes (by id, so a person can look
them up) and accuracy per input length, which shows both the genuinely
ambiguous short inputs and the damage done by truncation.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch

from tui.demo.dataset import Split


@torch.no_grad()
def evaluate(model, split: Split) -> dict:
    """Loss, accuracy, predictions and confidences on a whole split."""
    model.eval()
    logits = model(split.tokens, split.lengths)
    model.train()
    loss = torch.nn.functional.cross_entropy(logits, split.labels).item()
    probs = torch.softmax(logits, dim=1)
    confidence, prediction = probs.max(dim=1)
    accuracy = (prediction == split.labels).float().mean().item()
    return {"loss": loss, "acc": accuracy, "prediction": prediction.tolist(),
            "confidence": confidence.tolist()}


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def _bucket(length: int, max_len: int) -> tuple[int, str]:
    """(sort key, name): four equal buckets up to max_len, then the truncated ones."""
    if length > max_len:
        return max_len + 1, f">{max_len} (truncated)"
    width = max(max_len // 4, 1)
    low = ((length - 1) // width) * width + 1
    return low, f"{low}-{min(low + width - 1, max_len)}"


def prediction_text(split: Split, result: dict) -> str:
    """predictions.jsonl's text: one line per validation example, in corpus order."""
    lines = [
        json.dumps({"id": i, "label": label, "prediction": pred, "confidence": round(conf, 6)})
        for i, label, pred, conf in zip(split.ids, split.labels.tolist(),
                                         result["prediction"], result["confidence"])
    ]
    return "\n".join(lines) + "\n"


def write_predictions(path: Path, split: Split, result: dict) -> None:
    _atomic_write(path, prediction_text(split, result))


def error_analysis(split: Split, result: dict, num_classes: int, max_len: int) -> dict:
    labels = split.labels.tolist()
    confusion = [[0] * num_classes for _ in range(num_classes)]
    buckets: dict[tuple[int, str], list[int]] = {}
    mistakes = []
    for i, (label, pred, conf) in enumerate(zip(labels, result["prediction"],
                                                result["confidence"])):
        confusion[label][pred] += 1
        length = split.full_lengths[i]
        counts = buckets.setdefault(_bucket(length, max_len), [0, 0])
        counts[0] += 1
        counts[1] += pred == label
        if pred != label:
            mistakes.append({"id": split.ids[i], "label": label, "prediction": pred,
                             "confidence": round(conf, 6), "length": length})
    mistakes.sort(key=lambda m: (-m["confidence"], m["id"]))
    return {
        "examples": len(labels),
        "accuracy": round(result["acc"], 6),
        "loss": round(result["loss"], 6),
        "confusion_matrix": {"rows": "label", "columns": "prediction", "matrix": confusion},
        "worst_mistakes": mistakes[:10],
        "mistakes": len(mistakes),
        "accuracy_by_length": [
            {"lengths": name, "examples": n, "accuracy": round(ok / n, 6)}
            for (_, name), (n, ok) in sorted(buckets.items())
        ],
        "truncated": split.truncated,
        "max_len": max_len,
    }


def write_error_analysis(path: Path, analysis: dict) -> None:
    _atomic_write(path, json.dumps(analysis, indent=2) + "\n")
