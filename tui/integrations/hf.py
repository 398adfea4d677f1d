"""`IteraCallback` for `transformers.Trainer`: the run protocol in one line.

    from tui.integrations.hf import IteraCallback
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[IteraCallback()])
    trainer.train(resume_from_checkpoint=tui.integrations.resume_from())

The class is built the first time `IteraCallback` is looked up, so importing
this module (or `tui.integrations`) loads no transformers; without transformers
that lookup is an ImportError naming the extra to install.

What it does, under itera-tui only (without ITERA_RUN_DIR it does nothing):

- Every `on_log` goes to the run's metrics with `state.global_step`: `loss`,
  `grad_norm`, `learning_rate`, eval metrics, every numeric entry.
- NaN filter: `TrainingArguments.logging_nan_inf_filter` (on by default)
  replaces a NaN/inf step loss by the running average before it is logged, so
  a diverged run logs a plausible loss. There is no hook that sees the raw step
  loss, so the callback **turns the filter off for the run** (at init and
  again at train begin; the filter only changes what is logged, never the
  training). A NaN loss then reaches the `non_finite` rule at the first logged
  record at or after the step that produced it (`logging_steps` sets how soon).
  `grad_norm` is logged as HF computes it; add it to the rule
  (`metrics = ["loss", "grad_norm"]`) to stop on a non-finite gradient norm
  (not with fp16 loss scaling, where an inf norm only skips a step).
- Checkpoint requests (the `c` key, the schedule, a wrap-up, ITERA_CHECKPOINT_AT)
  set `control.should_save`; so does the last step of training when a checkpoint
  was asked for during the run or the plan's `resume` rule needs one
  (ITERA_FINAL_CHECKPOINT), so a finished run's newest checkpoint is the model as
  it finished, not the one of an early request; HF writes `checkpoint-N/` and, in `on_save`, the
  directory is fsynced, hashed and acknowledged (`mode: "hf"`). Its sha256 is
  the tree hash of `tui.campaign.files.tree_digest` (the sha256 of the
  `sha256sum` listing of its files, sorted by relative name). Every save is
  acknowledged, requested or scheduled. `save_only_model=True` is warned about:
  such a checkpoint holds no optimizer, scheduler or RNG state and cannot resume.
- A stop request (control file or SIGTERM) sets `control.should_training_stop`
  at the step's end; when a checkpoint was asked for first (a wrap-up asks for
  one, then stops) the save happens in that same step, before the stop.
- ITERA_MAX_STEPS (pilots, the resume check): training stops after that many
  steps. The learning-rate schedule keeps spanning the script's own length, so
  a pilot's steps are the full run's first steps and a resume reproduces the
  uninterrupted run; when the script's `max_steps` is shorter, it is raised.
- `load_best_model_at_end`: at the end HF loads the best checkpoint
  (`state.best_model_checkpoint`, by `metric_for_best_model`), so the model the
  script delivers is not its last state. `on_train_end` says which one in a
  `best_model` event (its path, step, metric and value, as trainer_state.json
  holds them): the engine compares that checkpoint's figure, the bundle takes
  that checkpoint and the report names its step.
- `output_dir` outside the run directory is redirected into it (same relative
  name): runs of different variants would otherwise overwrite each other's
  `checkpoint-N/`. `IteraCallback(keep_output_dir=True)` keeps yours.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from .bridge import join_run, scalar_metrics, warn

_INSTALL = "pip install 'itera-tui[hf]' (transformers and accelerate)"
_built: dict[str, type] = {}


def _inside(path: Path, folder: Path) -> bool:
    try:
        return path.resolve().is_relative_to(folder.resolve())
    except OSError:
        return False


def _build() -> type:
    try:
        from transformers import TrainerCallback
    except ImportError as error:
        raise ImportError(f"tui.integrations.hf.IteraCallback needs transformers: {_INSTALL} "
                          f"({error})") from error

    class IteraCallback(TrainerCallback):
        """Metrics, checkpoint and stop requests, ITERA_MAX_STEPS for a Trainer
        launched by itera-tui; inert otherwise. See `tui.integrations.hf`."""

        def __init__(self, *, keep_output_dir: bool = False, env=None) -> None:
            self.run = join_run(env)
            self.keep_output_dir = keep_output_dir
            self._prepared = False
            self._last_hook_t = time.perf_counter()
            self._asked = False  # a checkpoint was requested during this run
            self._saved_step: int | None = None

        @property
        def active(self) -> bool:
            return self.run is not None

        # -- setting the run up ----------------------------------------------------
        def on_init_end(self, args, state, control, **kwargs):
            if self.active:
                self._prepare(args)

        def on_train_begin(self, args, state, control, **kwargs):
            if not self.active:
                return
            self._prepare(args)  # also when added with trainer.add_callback after init
            budget = self.run.max_steps
            if budget is not None and state.max_steps and budget > state.max_steps:
                warn(f"ITERA_MAX_STEPS={budget} but this training plans {state.max_steps} steps "
                     "(set max_steps, or add the callback at Trainer(...) so it can raise it)")
            if args.save_only_model:
                warn("save_only_model=True: checkpoints hold no optimizer, scheduler or RNG "
                     "state, so a run cannot resume from them")

        def _prepare(self, args) -> None:
            if args.logging_nan_inf_filter:
                args.logging_nan_inf_filter = False
                if not self._prepared:
                    warn("logging_nan_inf_filter turned off for this run, so that a NaN or inf "
                         "loss is logged as such and reaches the non_finite stop rule")
            budget = self.run.max_steps
            if budget is not None and 0 < args.max_steps < budget:
                args.max_steps = budget
            if not self.keep_output_dir and not _inside(Path(args.output_dir), self.run.run_dir):
                args.output_dir = str(self._redirected(Path(args.output_dir)))
            self._prepared = True

        def _redirected(self, output_dir: Path) -> Path:
            relative = Path(os.path.relpath(output_dir.resolve(), Path.cwd().resolve()))
            if output_dir.is_absolute() or relative.parts[:1] == ("..",):
                relative = Path(output_dir.name or "hf")
            target = self.run.run_dir / relative
            warn(f"output_dir {output_dir.as_posix()!r} is outside this run's directory: "
                 f"writing to $ITERA_RUN_DIR/{relative.as_posix()} instead")
            return target

        # -- every step ------------------------------------------------------------
        def on_step_end(self, args, state, control, **kwargs):
            self._last_hook_t = time.perf_counter()
            if not self.active:
                return
            step = state.global_step
            stop = self.run.stop_requested()  # first: it reads a control file a signal overtook
            if self.run.checkpoint_requested(step):
                self._asked = True
                control.should_save = True  # saved in this step, before any stop below
            budget = self.run.max_steps
            if stop or (budget is not None and step >= budget):
                control.should_training_stop = True
            last = control.should_training_stop or (state.max_steps and step >= state.max_steps)
            if last and (self._asked or self.run.final_checkpoint) and self._saved_step != step:
                control.should_save = True  # the end of training: the model as it finished

        def on_log(self, args, state, control, logs=None, **kwargs):
            self._last_hook_t = time.perf_counter()
            if self.active:
                values = scalar_metrics(logs)
                if values:
                    self.run.log(state.global_step, **values)

        def on_evaluate(self, args, state, control, **kwargs):
            self._last_hook_t = time.perf_counter()

        def on_train_end(self, args, state, control, **kwargs):
            if not self.active or not args.load_best_model_at_end \
                    or not state.best_model_checkpoint:
                return
            best = Path(state.best_model_checkpoint)
            step = getattr(state, "best_global_step", None)
            if not isinstance(step, int):
                name = best.name.rsplit("-", 1)[-1]
                step = int(name) if name.isdigit() else None
            metric = args.metric_for_best_model or "loss"
            if not metric.startswith("eval_"):
                metric = f"eval_{metric}"  # as HF itself looks it up in the metrics
            self.run.event("best_model", step=state.global_step, path=self.run.relative(best),
                           best_step=step, metric=metric, value=state.best_metric,
                           greater_is_better=bool(args.greater_is_better))

        def on_save(self, args, state, control, **kwargs):
            if not self.active:
                return
            write_s = time.perf_counter() - self._last_hook_t
            path = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            if not path.is_dir():  # a hyperparameter search trial folder, or a custom _save
                warn(f"saved checkpoint not found at {path.name} under output_dir; "
                     "not acknowledged")
                return
            self._saved_step = state.global_step
            self.run.acknowledge_checkpoint(path, step=state.global_step, mode="hf",
                                            write_s=write_s)

    return IteraCallback


def __getattr__(name: str):
    if name == "IteraCallback":
        if name not in _built:
            _built[name] = _build()
        return _built[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
