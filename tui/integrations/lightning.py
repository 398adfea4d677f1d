"""`IteraCallback` for Lightning (`lightning`, or `pytorch_lightning` when that is
the one in use): the run protocol in one line.

    from tui.integrations import resume_from
    from tui.integrations.lightning import IteraCallback
    trainer = L.Trainer(..., callbacks=[IteraCallback()])
    trainer.fit(model, datamodule=dm, ckpt_path=resume_from())

The class is built the first time `IteraCallback` is looked up, so importing
this module loads no Lightning. It subclasses the `Callback` of the package
the script already imported (`pytorch_lightning` if only that one is loaded,
else `lightning.pytorch`, else whichever is installed): a Trainer accepts only
callbacks of its own package.

What it does, under itera-tui only (without ITERA_RUN_DIR it does nothing):

- Metrics: after each optimizer step, `trainer.callback_metrics` (what the
  module logged with `self.log`) at `trainer.global_step`, plus the
  `training_step` loss as `loss` when the module did not log one; after each
  validation (not the sanity check), the metrics validation changed, in a
  record of their own, so a validation value is not repeated in every batch
  record after it.
- Checkpoint requests (the `c` key, the schedule, a wrap-up, ITERA_CHECKPOINT_AT):
  `trainer.save_checkpoint` at the end of that batch, to a temporary name in
  the same directory, fsynced, then `os.replace`d to
  `$ITERA_RUN_DIR/checkpoints/step-NNNNNN.ckpt` and acknowledged (`mode:
  "lightning"`); again at the end of training when a checkpoint was asked for
  during the run or the plan's `resume` rule needs one (ITERA_FINAL_CHECKPOINT).
  Resume through Lightning's own `ckpt_path`.
- RNG states: Lightning's checkpoints do not keep them, so dropout would draw
  other masks after a resume. The callback stores the SDK's RNG capture
  (python, numpy, torch CPU, CUDA; rank 0's under DDP, where Lightning keeps
  one callback state) in its own callback state, in every checkpoint the
  Trainer writes (`ModelCheckpoint`'s too, and outside itera-tui as well: the
  one thing the callback does there), and restores it when the resumed fit
  starts its first batch. A mid-epoch resume also needs a dataloader with
  `state_dict`/`load_state_dict` (Lightning warns when it has none).
- A stop request (control file or SIGTERM) sets `trainer.should_stop`; when a
  checkpoint was asked for first (a wrap-up asks for one, then stops), the
  save happens first, in the same batch end.
- ITERA_MAX_STEPS: training stops after that many optimizer steps; the schedule
  keeps the script's own length (raised when `max_steps` is shorter), so a
  pilot's steps are the full run's first steps.
"""

from __future__ import annotations

import os
import sys
import time

from .bridge import as_number, join_run, scalar_metrics, warn

_INSTALL = "pip install 'itera-tui[lightning]'"
_built: dict[str, type] = {}


def _framework_name() -> str:
    if "pytorch_lightning" in sys.modules and "lightning" not in sys.modules:
        return "pytorch_lightning"
    try:
        import lightning.pytorch  # noqa: F401
        return "lightning.pytorch"
    except ImportError:
        pass
    try:
        import pytorch_lightning  # noqa: F401
        return "pytorch_lightning"
    except ImportError as error:
        raise ImportError("tui.integrations.lightning.IteraCallback needs lightning (or "
                          f"pytorch_lightning): {_INSTALL} ({error})") from error


def _training_loss(outputs):
    if isinstance(outputs, dict):
        outputs = outputs.get("loss")
    return as_number(outputs) if outputs is not None else None


def _same(a, b) -> bool:
    return a == b or (a != a and b != b)  # NaN equals NaN here


def _build(framework: str) -> type:
    import importlib

    Callback = importlib.import_module(framework).Callback

    from .. import training
    from ..training import rng

    class IteraCallback(Callback):
        """Metrics, checkpoint and stop requests, ITERA_MAX_STEPS and RNG states
        for a Lightning Trainer launched by itera-tui; inert otherwise. See
        `tui.integrations.lightning`."""

        def __init__(self, *, env=None) -> None:
            self.run: training.Run | None = join_run(env)
            self._logged_step: int | None = None
            self._before_validation: dict = {}
            self._validation_keys: set[str] = set()
            self._rng_to_restore: dict | None = None
            self._asked = False  # a checkpoint was requested during this run
            self._saved_step: int | None = None

        @property
        def active(self) -> bool:
            return self.run is not None

        @property
        def state_key(self) -> str:
            return "IteraCallback"

        # -- set-up ---------------------------------------------------------------
        def setup(self, trainer, pl_module, stage) -> None:
            budget = self.run.max_steps if self.active else None
            if budget is not None and stage == "fit" and 0 < trainer.max_steps < budget:
                trainer.fit_loop.epoch_loop.max_steps = budget

        # -- metrics, requests ------------------------------------------------------
        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx) -> None:
            if self._rng_to_restore is not None:  # the first batch of a resumed fit
                rng.restore(self._rng_to_restore)
                self._rng_to_restore = None

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            if not self.active:
                return
            step = trainer.global_step
            if step != self._logged_step:  # an optimizer step happened (not mid-accumulation)
                self._logged_step = step
                values = scalar_metrics({k: v for k, v in trainer.callback_metrics.items()
                                         if k not in self._validation_keys})
                loss = _training_loss(outputs)
                if "loss" not in values and loss is not None:
                    values["loss"] = loss
                if values:
                    self.run.log(step, **values)
            stop = self.run.stop_requested()  # first: it reads a control file a signal overtook
            if self.run.checkpoint_requested(step):
                self._asked = True
                self.save(trainer, step)
            budget = self.run.max_steps
            if stop or (budget is not None and step >= budget):
                trainer.should_stop = True

        def on_train_end(self, trainer, pl_module) -> None:
            """The model as training finished, when a checkpoint was asked for during the
            run or the plan's `resume` rule needs one (ITERA_FINAL_CHECKPOINT)."""
            if self.active and (self._asked or self.run.final_checkpoint) \
                    and self._saved_step != trainer.global_step:
                self.save(trainer, trainer.global_step)

        def on_validation_start(self, trainer, pl_module) -> None:
            self._before_validation = scalar_metrics(trainer.callback_metrics)

        def on_validation_end(self, trainer, pl_module) -> None:
            if not self.active:
                return
            # training logs nothing during validation: what changed is validation's
            before = self._before_validation
            changed = {k: v for k, v in scalar_metrics(trainer.callback_metrics).items()
                       if k not in before or not _same(v, before[k])}
            self._validation_keys.update(changed)  # the sanity check's too
            if changed and not trainer.sanity_checking:
                self.run.log(trainer.global_step, **changed)

        # -- checkpoints ----------------------------------------------------------------
        def save(self, trainer, step: int):
            """Write `checkpoints/step-NNNNNN.ckpt` atomically and acknowledge it.
            Collective: every rank calls it (Lightning's save may be distributed)."""
            from ..training import foreign

            final = self.run.run_dir / "checkpoints" / f"step-{step:06d}.ckpt"
            temp = final.with_name(f".{final.name}.tmp")  # same name on every rank
            started = time.perf_counter()
            try:
                if trainer.is_global_zero:
                    final.parent.mkdir(parents=True, exist_ok=True)
                trainer.save_checkpoint(temp)
                if trainer.is_global_zero:
                    foreign.make_durable(temp)
                    os.replace(temp, final)
                    foreign.make_durable(final.parent)
            except Exception as error:  # a failed save is reported; training goes on
                self.run.report_checkpoint_failure(error, step, final)
                warn(f"checkpoint at step {step} failed: {type(error).__name__}: {error}")
                return None
            self._saved_step = step
            return self.run.acknowledge_checkpoint(final, step=step, mode="lightning",
                                                   write_s=time.perf_counter() - started)

        def state_dict(self) -> dict:
            return {"rng": rng.capture()}

        def load_state_dict(self, state_dict: dict) -> None:
            self._rng_to_restore = state_dict.get("rng")

    return IteraCallback


def __getattr__(name: str):
    if name == "IteraCallback":
        framework = _framework_name()
        if framework not in _built:
            _built[framework] = _build(framework)
        return _built[framework]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["IteraCallback"]
