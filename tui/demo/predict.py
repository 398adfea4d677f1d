"""Redo a demo run's predictions from its artifact and the pinned corpus, with torch alone.

Why it exists: a bundle must give a reader a model, not only tensors. The
artifact's meta names this function (`predict`), the wrap-up keeps this
module and the ones it imports in the bundle's `code/`, and RELOAD.md calls
it on the rebuilt model: the same encoding (`dataset.encode`, the run's
`max_len`), the same evaluation (`report.evaluate`) and the same text
(`report.prediction_text`) as the run, so its `predictions.jsonl` comes out
again. Only torch and this package's demo modules are imported.
"""

from __future__ import annotations

from pathlib import Path

from tui.demo import dataset, report

VALIDATION_FILE = "val.jsonl"


def predictions(model, meta: dict, corpus_dir) -> str:
    """predictions.jsonl's text for `model` on the validation file in `corpus_dir`."""
    split = dataset.encode(dataset.read_jsonl(Path(corpus_dir) / VALIDATION_FILE),
                           int(meta["max_len"]))
    return report.prediction_text(split, report.evaluate(model, split))
