"""The handle a training script holds: `attach()` reads the run protocol from the
environment and returns a `Run` that logs metrics, answers "should I checkpoint
or stop now?", and saves checkpoints with an acknowledgement the engine reads.

Outside itera-tui (no ITERA_* variables) the same script still works: metrics go
to ./itera-metrics.jsonl and checkpoints under ./checkpoints. Importing this
module never imports torch, so a script that only logs stays light.
"""

from __future__ import annotations

import math
import os
import signal
import sys
import threading
import time
from pathlib import Path

from . import distributed
from .control import ControlReader
from .metrics import MetricsWriter, non_finite_names, to_plain

LOCAL_METRICS = "itera-metrics.jsonl"
_RESERVED = frozenset({"t", "step", "event"})


class NonFiniteMetric(ValueError):
    """A logged metric was NaN or infinite (raised only with raise_on_non_finite)."""

    def __init__(self, step: int, names: list[str]) -> None:
        super().__init__(f"non-finite metric at step {step}: {', '.join(names)}")
        self.step = step
        self.names = names


def _warn(message: str) -> None:
    print(f"itera training: {message}", file=sys.stderr)


def _int_env(env, name: str) -> int | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        _warn(f"ignoring {name}={text!r}: not an integer")
        return None


def _float_env(env, name: str) -> float | None:
    text = env.get(name, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value):
        _warn(f"ignoring {name}={text!r}: not a finite number")
        return None
    return value


def _steps_env(env, name: str) -> frozenset[int]:
    steps = set()
    for part in env.get(name, "").split(","):
        if part.strip():
            try:
                steps.add(int(part))
            except ValueError:
                _warn(f"ignoring {part.strip()!r} in {name}: not an integer")
    return frozenset(steps)


class Run:
    """One training process's view of its run. Build it with `attach()`."""

    def __init__(self, *, run_id: str, run_dir: Path, managed: bool, metrics_path: Path,
                 control_path: Path | None, max_steps: int | None, resume_from: Path | None,
                 checkpoint_at: frozenset[int], raise_on_non_finite: bool,
                 final_checkpoint: bool = False, launched_at: float | None = None) -> None:
        self.run_id = run_id
        self.run_dir = run_dir
        self.managed = managed
        self.metrics_path = metrics_path
        self.control_path = control_path
        self.max_steps = max_steps
        self.resume_from = resume_from
        self.checkpoint_at = checkpoint_at
        self.raise_on_non_finite = raise_on_non_finite
        # ITERA_FINAL_CHECKPOINT=1: the plan's `resume` rule needs a checkpoint, so the
        # callbacks save one at the end of training
        self.final_checkpoint = final_checkpoint
        self._metrics = MetricsWriter(metrics_path)
        self._control = ControlReader.for_this_process(control_path, launched_at)
        self._sigterm = threading.Event()
        self._stop_announced = False
        self._last_step: int | None = None
        self._writer = None  # checkpoint.AsyncWriter, created on first save

    # -- metrics ---------------------------------------------------------------------
    def log(self, step: int, **metrics) -> bool:
        """Append {"t", "step", **metrics}; False if any value is NaN or infinite."""
        clash = _RESERVED.intersection(metrics)
        if clash:
            raise ValueError(f"metric names {sorted(clash)} are reserved")
        values = {name: to_plain(value) for name, value in metrics.items()}
        bad = non_finite_names(values)
        self._last_step = int(step)
        if distributed.rank() == 0:
            self._metrics.write({"t": time.time(), "step": int(step), **values})
        if bad and self.raise_on_non_finite:
            raise NonFiniteMetric(int(step), bad)
        return not bad

    def event(self, name: str, **fields) -> None:
        """Append an event record {"t", "step", "event": name, **fields}."""
        step = fields.pop("step", self._last_step)
        if distributed.rank() == 0:
            values = {key: to_plain(value) for key, value in fields.items()}
            self._metrics.write({"t": time.time(), "step": step, "event": name, **values})

    # -- requests ---------------------------------------------------------------------
    def checkpoint_requested(self, step: int | None = None) -> bool:
        """True when the engine asked for a checkpoint not yet saved, or `step` is in
        ITERA_CHECKPOINT_AT. Cheap enough for every step; collective under DDP."""
        self._control.poll()
        wanted = self._control.pending_checkpoint is not None or (
            step is not None and step in self.checkpoint_at)
        return distributed.any_rank(wanted)

    def stop_requested(self) -> bool:
        """True after SIGTERM or a "stop" request: save a checkpoint and exit."""
        # A stop that came by signal may have overtaken the control lines written just
        # before it (a wrap-up writes "checkpoint" then "stop", then sends SIGTERM):
        # read the file now, not at the next poll interval, so that request is seen.
        self._control.poll(force=self._sigterm.is_set() and not self._stop_announced)
        reason = "sigterm" if self._sigterm.is_set() else ("control" if self._control.stop_seq is not None else None)
        stop = distributed.any_rank(reason is not None)
        if stop and not self._stop_announced:
            self._stop_announced = True
            seq = self._control.stop_seq
            self.event("stop_requested", reason=reason or "other_rank",
                       request_seq=seq if seq is not None and seq >= 0 else None)
        return stop

    def _on_sigterm(self, signum, frame) -> None:
        # Only set a flag: writing from a signal handler could re-enter a write.
        self._sigterm.set()

    def install_sigterm_handler(self) -> bool:
        try:
            signal.signal(signal.SIGTERM, self._on_sigterm)
        except ValueError:  # not the main thread
            _warn("SIGTERM handler not installed (attach() was not called from the main thread)")
            return False
        return True

    # -- checkpoints ------------------------------------------------------------------
    def default_checkpoint_path(self, step: int) -> Path:
        return self.run_dir / "checkpoints" / f"step-{int(step):06d}.pt"

    def save_checkpoint(self, *, model, optimizer=None, scheduler=None, scaler=None, step: int,
                        data_state=None, extra=None, async_: bool = False, path=None):
        """Save everything a resume needs (atomic, hashed, acknowledged in the metrics).

        Under torch.distributed every rank must call it; only rank 0 writes. With
        async_=True the call blocks only while the state is copied to CPU memory."""
        from . import checkpoint

        started = time.perf_counter()
        if self._writer is None:
            self._writer = checkpoint.AsyncWriter()
        self._writer.wait()
        target = Path(path) if path is not None else self.default_checkpoint_path(step)
        payload = checkpoint.build_payload(model=model, optimizer=optimizer, scheduler=scheduler,
                                           scaler=scaler, step=step, data_state=data_state, extra=extra)
        request_seq = self._control.take_checkpoint_request()
        mode = "async" if async_ else "sync"
        if distributed.rank() != 0:
            return checkpoint.CheckpointInfo(path=target, step=int(step), mode=mode,
                                             block_s=time.perf_counter() - started, request_seq=request_seq)
        if not async_:
            try:
                result = checkpoint.write(payload, target)
            except Exception as error:
                self._report_failure(error, step, target)
                raise
            return self._acknowledge(result, step, mode, time.perf_counter() - started, request_seq)
        copied = checkpoint.snapshot(payload)
        block_s = time.perf_counter() - started
        self._writer.submit(
            copied, target,
            on_done=lambda result: self._acknowledge(result, step, mode, block_s, request_seq),
            on_error=lambda error: self._report_failure(error, step, target))
        return checkpoint.CheckpointInfo(path=target, step=int(step), mode=mode, block_s=block_s,
                                         request_seq=request_seq)

    def acknowledge_checkpoint(self, path, *, step: int, mode: str, write_s: float | None = None):
        """Acknowledge a checkpoint a framework wrote itself (an HF `checkpoint-N/`
        directory, a Lightning `.ckpt`): fsync it, hash it (a directory as
        `tui.campaign.files.tree_digest` defines) and append the same ack as
        `save_checkpoint`, which takes the pending request. Never raises: a problem
        becomes a "checkpoint_failed" event and None is returned. Under
        torch.distributed every rank calls it; rank 0 hashes and acknowledges."""
        from ..campaign.held import hold
        from . import foreign
        from .checkpoint import CheckpointInfo

        target = Path(path)
        request_seq = self._control.take_checkpoint_request()
        if distributed.rank() != 0:
            return CheckpointInfo(path=target, step=int(step), mode=mode, block_s=0.0,
                                  request_seq=request_seq)
        started = time.perf_counter()
        try:
            sha256, size = foreign.fingerprint(target)
        except (OSError, ValueError) as error:
            self._report_failure(error, step, target)
            return None
        relative = self._relative(target)
        # held with hard links until the engine's verifier has read it: a trainer that
        # rotates its checkpoints (HF save_total_limit) cannot race the verification
        held = hold(self.run_dir, relative, f"{int(step)}-{sha256[:12]}")
        block_s = time.perf_counter() - started
        self.event("checkpoint", step=int(step), path=relative, sha256=sha256,
                   bytes=size, write_s=None if write_s is None else round(write_s, 6),
                   block_s=round(block_s, 6), mode=mode, request_seq=request_seq,
                   **({"held": held} if held else {}))
        return CheckpointInfo(path=target, step=int(step), mode=mode, block_s=block_s,
                              request_seq=request_seq, sha256=sha256, bytes=size, write_s=write_s)

    def wait_for_checkpoint(self):
        """Wait for an async write in flight; return its CheckpointInfo (None if none).
        Raises CheckpointError if the background write failed."""
        return self._writer.wait() if self._writer is not None else None

    def relative(self, path) -> str:
        """`path` as the engine names a run's files: relative to the run directory."""
        return self._relative(Path(path))

    def _relative(self, path: Path) -> str:
        try:
            return Path(os.path.relpath(path, self.run_dir)).as_posix()
        except ValueError:  # another drive (Windows): no relative form exists
            return path.name

    def report_checkpoint_failure(self, error: BaseException, step: int, target) -> None:
        """Append a "checkpoint_failed" event (the engine warns with it) for a save
        a framework attempted, with the error's reason and no absolute path."""
        self._report_failure(error, step, Path(target))

    def _report_failure(self, error: BaseException, step: int, target: Path) -> None:
        # strerror, not str(error): the latter carries absolute temp-file paths.
        reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
        self.event("checkpoint_failed", step=int(step), path=self._relative(target),
                   error=f"{type(error).__name__}: {reason}")

    def _acknowledge(self, result, step, mode, block_s, request_seq):
        from .checkpoint import CheckpointInfo

        # "digest" ("algorithm:hex") always; "sha256" only when that is the algorithm
        hashes = {"digest": result.digest} | ({"sha256": result.sha256} if result.sha256 else {})
        self.event("checkpoint", step=int(step), path=self._relative(result.path), **hashes,
                   bytes=result.bytes, write_s=round(result.write_s, 6), block_s=round(block_s, 6),
                   mode=mode, request_seq=request_seq)
        return CheckpointInfo(path=result.path, step=int(step), mode=mode, block_s=block_s,
                              request_seq=request_seq, sha256=result.sha256, bytes=result.bytes,
                              write_s=result.write_s, digest=result.digest)


def attach(*, metrics_path: str | os.PathLike | None = None, raise_on_non_finite: bool = False,
           checkpoint_on_sigterm: bool | None = None, env=None) -> Run:
    """Join the run described by the ITERA_* environment (or a local stand-in).

    checkpoint_on_sigterm (default: on when launched by itera-tui) installs a
    SIGTERM handler so that `stop_requested()` turns True instead of the process
    dying; the script is then expected to save and exit within the grace period."""
    env = os.environ if env is None else env
    managed = bool(env.get("ITERA_RUN_DIR"))
    run_dir = Path(env["ITERA_RUN_DIR"]) if managed else Path.cwd()
    if metrics_path is None:
        if env.get("ITERA_METRICS"):
            metrics_path = env["ITERA_METRICS"]
        else:
            metrics_path = run_dir / "metrics.jsonl" if managed else Path.cwd() / LOCAL_METRICS
    resume = env.get("ITERA_RESUME", "").strip()
    run = Run(
        run_id=env.get("ITERA_RUN_ID") or ("unnamed" if managed else "local"),
        run_dir=run_dir,
        managed=managed,
        metrics_path=Path(metrics_path),
        control_path=Path(env["ITERA_CONTROL"]) if env.get("ITERA_CONTROL") else None,
        max_steps=_int_env(env, "ITERA_MAX_STEPS"),
        resume_from=Path(resume) if resume else None,
        checkpoint_at=_steps_env(env, "ITERA_CHECKPOINT_AT"),
        raise_on_non_finite=raise_on_non_finite,
        final_checkpoint=env.get("ITERA_FINAL_CHECKPOINT", "") == "1",
        launched_at=_float_env(env, "ITERA_LAUNCHED_AT"),
    )
    if checkpoint_on_sigterm is None:
        checkpoint_on_sigterm = managed
    if checkpoint_on_sigterm:
        run.install_sigterm_handler()
    return run
