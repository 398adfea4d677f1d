"""Checkpoint payloads: what goes in, how it is snapshotted, how it comes back.

A checkpoint must hold everything a resume needs to continue as if nothing had
happened (model, optimizer, scheduler, AMP scaler, every rank's RNG states, the
step and the data position), and must load with ``torch.load(weights_only=True)``
so that opening one never runs code. Plain-type checks run at save time, where a
bad ``data_state`` is cheap to fix, instead of at resume time, days later.

Async saves copy the state into CPU memory (the only part the training loop
waits for) and a background thread writes it; at most one write is in flight.
Checkpoints are hashed with the fast digest (`digest.fast_algorithm()`): they
are big and written often, and their digest only guards against damage.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from . import distributed, rng
from .atomic import FORMAT_VERSION, WriteResult, write_torch_file
from .digest import fast_algorithm

KIND = "checkpoint"


class CheckpointError(RuntimeError):
    """A checkpoint could not be written, or is not a loadable itera checkpoint."""


@dataclass(frozen=True)
class CheckpointInfo:
    """Where a checkpoint went and what it cost. For an async save still in
    flight (or on a rank other than 0) digest, bytes and write_s are None;
    ``Run.wait_for_checkpoint()`` returns the completed info. ``digest`` is
    "algorithm:hex" (see digest.py); ``sha256`` is set only when that is the
    algorithm (no xxhash installed)."""

    path: Path
    step: int
    mode: str
    block_s: float
    request_seq: int | None = None
    sha256: str | None = None
    bytes: int | None = None
    write_s: float | None = None
    digest: str | None = None

    @property
    def done(self) -> bool:
        return self.digest is not None or self.sha256 is not None  # sha256 only: a framework's file


_PLAIN_LEAVES = (type(None), bool, int, float, complex, str, bytes, bytearray)


def check_plain(value, where: str) -> None:
    """Raise TypeError unless `value` loads under weights_only (plain types, tensors).

    Types are matched exactly: a str subclass such as torch's TorchVersion is
    refused by the weights_only unpickler even though it is a str."""
    import torch

    kind = type(value)
    if kind in _PLAIN_LEAVES or isinstance(value, (torch.Tensor, torch.Size, torch.dtype, torch.device)):
        return
    if kind in (dict, OrderedDict):
        for key, item in value.items():
            if type(key) not in _PLAIN_LEAVES:
                raise TypeError(f"{where}: key {key!r} ({type(key).__name__}) is not a plain type")
            check_plain(item, f"{where}[{key!r}]")
        return
    if kind in (list, tuple, set):
        for index, item in enumerate(value):
            check_plain(item, f"{where}[{index}]")
        return
    hint = " (use int()/float()/.tolist() or torch.as_tensor())" if kind.__module__ == "numpy" else ""
    raise TypeError(f"{where}: {kind.__module__}.{kind.__qualname__} cannot be stored in a "
                    f"weights_only checkpoint; use plain types or tensors{hint}")


def _state_of(obj, name: str):
    if obj is None:
        return None
    if hasattr(obj, "state_dict"):
        return obj.state_dict()
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"{name}: expected an object with state_dict() or a mapping, got {type(obj).__name__}")


def build_payload(*, model, optimizer, scheduler, scaler, step: int, data_state, extra) -> dict:
    """The checkpoint dict. Collective under torch.distributed (gathers RNG states)."""
    import time

    import torch

    payload = {
        "itera_kind": KIND,
        "format_version": FORMAT_VERSION,
        "step": int(step),
        "model": _state_of(model, "model"),
        "optimizer": _state_of(optimizer, "optimizer"),
        "scheduler": _state_of(scheduler, "scheduler"),
        "scaler": _state_of(scaler, "scaler"),
        "rng": {"world_size": distributed.world_size(), "per_rank": distributed.gather_all(rng.capture())},
        "data_state": data_state,
        "extra": extra,
        "torch_version": str(torch.__version__),
        "saved_at": time.time(),
    }
    for key, value in payload.items():
        check_plain(value, key)
    return payload


def snapshot(value):
    """A deep copy of the payload with every tensor copied into CPU memory."""
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu", copy=True)
    if isinstance(value, dict):
        copied = OrderedDict() if isinstance(value, OrderedDict) else {}
        for key, item in value.items():
            copied[key] = snapshot(item)
        return copied
    if isinstance(value, list):
        return [snapshot(item) for item in value]
    if isinstance(value, tuple):
        return tuple(snapshot(item) for item in value)
    if isinstance(value, set):
        return set(value)
    return value


def write(payload: dict, path: Path) -> WriteResult:
    return write_torch_file(payload, path, kind=KIND, step=payload["step"], algorithm=fast_algorithm())


class AsyncWriter:
    """One background checkpoint write at a time; errors surface on the next wait()."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._result: CheckpointInfo | None = None
        self._error: BaseException | None = None

    @property
    def busy(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, payload: dict, path: Path, on_done: Callable[[WriteResult], CheckpointInfo],
               on_error: Callable[[BaseException], None]) -> None:
        self.wait()

        def work() -> None:
            try:
                self._result = on_done(write(payload, path))
            except BaseException as error:  # reported to the caller on wait()
                self._error = error
                on_error(error)

        self._result = None
        # Not a daemon: a script that ends right after an async save still
        # finishes writing the file before the interpreter exits.
        self._thread = threading.Thread(target=work, name="itera-checkpoint-writer", daemon=False)
        self._thread.start()

    def wait(self) -> CheckpointInfo | None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise CheckpointError(f"async checkpoint write failed: {error}") from error
        return self._result


def _load_into(target, state, name: str, path) -> None:
    if target is None:
        return
    if state is None:
        raise CheckpointError(f"{path}: the checkpoint holds no {name} state")
    target.load_state_dict(state)


def load_checkpoint(path, *, model=None, optimizer=None, scheduler=None, scaler=None,
                    map_location="cpu", restore_rng: bool = True) -> dict:
    """Load a checkpoint (weights_only=True), restore what is given, return the payload."""
    import torch

    payload = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(payload, dict) or payload.get("itera_kind") != KIND:
        kind = payload.get("itera_kind") if isinstance(payload, dict) else type(payload).__name__
        raise CheckpointError(f"{path}: not an itera checkpoint (kind: {kind})")
    if payload.get("format_version", 0) > FORMAT_VERSION:
        raise CheckpointError(f"{path}: format version {payload['format_version']} is newer than "
                              f"this SDK ({FORMAT_VERSION})")
    _load_into(model, payload["model"], "model", path)
    _load_into(optimizer, payload["optimizer"], "optimizer", path)
    _load_into(scheduler, payload["scheduler"], "scheduler", path)
    _load_into(scaler, payload["scaler"], "scaler", path)
    if restore_rng:
        per_rank = payload["rng"]["per_rank"]
        me = distributed.rank()
        if me >= len(per_rank):
            raise CheckpointError(f"{path}: saved with {len(per_rank)} rank(s), cannot restore the RNG "
                                  f"state of rank {me} (pass restore_rng=False to skip)")
        rng.restore(per_rank[me])
    return payload
