"""Which model a run delivers, when it is not its last state.

HF's `load_best_model_at_end` reloads, at the end of training, the checkpoint
with the best `metric_for_best_model` (`trainer_state.json`:
`best_model_checkpoint`, `best_metric`, `best_global_step`): the script then
saves and hands over *that* model, e.g. checkpoint-75 of a 150-step run. Its
figure is the one to compare, its checkpoint the one to bundle, and the report
says which step it is; comparing the last evaluation while delivering the best
checkpoint would describe a model nobody has. `IteraCallback.on_train_end`
writes the facts as a `best_model` event in the run's metrics; `read_run`
(outcome.py `ReadoutFold`) folds it in with `DeliveredModel.from_record`, and
the live engine's fold carries it in `run_exited` (`to_fields`). A zero-line
script (no callback) says the same in its checkpoint folders
(`trainer_state.json`, `training_args.bin`): `from_run_files` reads them
(`tui.engine.reading.trainer_state`) when the run's records named none, so the
figure compared and the checkpoint bundled are the best one's either way.
Stdlib only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from ..reading.trainer_state import best_model_fields

BEST_MODEL_EVENT = "best_model"


@dataclass(frozen=True)
class DeliveredModel:
    """The checkpoint a run's training reloaded at its end (HF load_best_model_at_end)."""

    path: str  # relative to the run directory, e.g. "hf-out/checkpoint-75"
    step: int | None  # the global step of that checkpoint
    metric: str  # what chose it (HF's metric_for_best_model, as logged: "eval_loss")
    value: float | None  # its value there (best_metric)

    @classmethod
    def from_record(cls, record: dict) -> "DeliveredModel | None":
        """From a `best_model` event; None when it is not one or is malformed (a run's
        file is text it controls: a wrong type is dropped, never trusted)."""
        if record.get("event") != BEST_MODEL_EVENT:
            return None
        path, step, metric = record.get("path"), record.get("best_step"), record.get("metric")
        value = record.get("value")
        if not isinstance(path, str) or not path or path.startswith("/") \
                or ".." in path.split("/") or not isinstance(metric, str):
            return None
        if isinstance(step, bool) or not isinstance(step, int):
            step = None
        finite = isinstance(value, (int, float)) and not isinstance(value, bool) \
            and math.isfinite(value)
        return cls(path.rstrip("/"), step, metric[:200], float(value) if finite else None)

    @classmethod
    def from_run_files(cls, run_dir: Path) -> "DeliveredModel | None":
        """From the run's HF checkpoint folders (no callback); None when they name none."""
        fields = best_model_fields(run_dir)
        return None if fields is None else cls.from_record({"event": BEST_MODEL_EVENT,
                                                            **fields})

    def to_fields(self) -> dict:
        """As `run_exited` carries it (flat, so the ledger's schema checks each field)."""
        return {"delivered_path": self.path, "delivered_step": self.step,
                "delivered_metric": self.metric, "delivered_value": self.value}

    @classmethod
    def from_fields(cls, ev) -> "DeliveredModel | None":
        """From a `run_exited` event (tui.engine.ledger.events.RunExited) that carries one."""
        if ev.delivered_path is None:
            return None
        return cls.from_record({"event": BEST_MODEL_EVENT, "path": ev.delivered_path,
                                "best_step": ev.delivered_step, "metric": ev.delivered_metric,
                                "value": ev.delivered_value})

    def text(self) -> str:
        """For the report: "step 75 (`hf-out/checkpoint-75`, the best eval_loss 0.41,
        reloaded at the end by load_best_model_at_end)"."""
        value = f" {self.value:.4g}" if self.value is not None else ""
        return (f"step {self.step if self.step is not None else '?'} (`{self.path}`, the best "
                f"{self.metric}{value}, reloaded at the end by load_best_model_at_end)")
