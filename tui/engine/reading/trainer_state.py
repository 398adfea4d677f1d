"""What an HF Trainer's checkpoint folders say, read as files: no torch, no transformers.

A zero-line HF script (no itera callback) tells the engine nothing itself; its
`checkpoint-N/` folders do. `trainer_state.json` holds the trainer's
`log_history` (each logged `epoch` with its `step`, hence the steps per epoch),
`logging_steps`, and `best_model_checkpoint` / `best_metric` /
`best_global_step`; `training_args.bin` (torch's zip of one pickle) holds
whether `load_best_model_at_end` was on and by which `metric_for_best_model`.
The pickle is never unpickled: `pickletools.genops` lists its opcodes, and a
field is the string opcode of its name followed by the opcode of a plain
value (True, False, None, a string, a number). Everything is read through
`read_regular`, bounded; anything unreadable is no answer, never an error.
Stdlib only.
"""

from __future__ import annotations

import io
import json
import os
import pickletools
import stat
import zipfile
from pathlib import Path
from typing import Iterable, Iterator

from .regular_files import read_regular

STATE_FILE = "trainer_state.json"
ARGS_FILE = "training_args.bin"
STATE_GLOBS = (f"checkpoint-*/{STATE_FILE}", f"*/checkpoint-*/{STATE_FILE}")
STATE_LIMIT = 16 << 20  # bytes of one trainer_state.json (its log_history grows with the run)
ARGS_LIMIT = 1 << 20  # bytes of one training_args.bin (a few KiB)
NEWEST = 64  # checkpoint folders parsed at most, newest first
_VALUE_OPS = {"NEWTRUE": True, "NEWFALSE": False, "NONE": None}
_STRING_OPS = ("SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE")
_NUMBER_OPS = ("BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT")


def checkpoint_states(run_dir: Path) -> Iterator[tuple[Path, dict]]:
    """(folder, parsed trainer_state.json) of the checkpoint folders in the run directory
    and one folder below (`hf-out/checkpoint-12`), newest (the step in the name) first,
    each parsed only when asked for: the newest holds the whole log_history."""
    folders: list[tuple[int, str, Path]] = []
    for pattern in STATE_GLOBS:
        try:
            paths = sorted(Path(run_dir).glob(pattern))
        except OSError:
            continue
        for path in paths:
            tail = path.parent.name.rsplit("-", 1)[-1]
            folders.append((int(tail) if tail.isdigit() else -1, str(path), path))
    for _, _, path in sorted(folders, reverse=True)[:NEWEST]:
        try:
            state = json.loads(read_regular(path, limit=STATE_LIMIT))
        except (OSError, ValueError, UnicodeDecodeError, RecursionError):
            continue
        if isinstance(state, dict):
            yield path.parent, state


def training_args(folder: Path) -> dict[str, object]:
    """The plain-valued fields of a checkpoint's `training_args.bin` (name -> True, False,
    None, a string or a number), read from the pickle's opcodes, never executed; {} when
    it is not torch's zip format or does not parse."""
    try:
        data = read_regular(Path(folder) / ARGS_FILE, limit=ARGS_LIMIT)
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            member = next((i for i in archive.infolist() if i.filename.endswith("/data.pkl")
                           or i.filename == "data.pkl"), None)
            if member is None or member.file_size > ARGS_LIMIT:
                return {}
            ops = [(op.name, arg) for op, arg, _ in pickletools.genops(archive.read(member))]
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError, RuntimeError):
        return {}
    fields: dict[str, object] = {}
    for i, (name, arg) in enumerate(ops[:-1]):
        if name not in _STRING_OPS or not isinstance(arg, str):
            continue
        j = i + 1
        while j < len(ops) and ops[j][0] in ("BINPUT", "LONG_BINPUT", "MEMOIZE"):
            j += 1  # the memo of the name, then its value
        if j == len(ops):
            break
        op, value = ops[j]
        if op in _VALUE_OPS:
            fields.setdefault(arg, _VALUE_OPS[op])
        elif op in _STRING_OPS or op in _NUMBER_OPS:
            fields.setdefault(arg, value)
    return fields


def steps_per_epoch(states: Iterable[tuple[Path, dict]]) -> float | None:
    """The trainer's steps per epoch, from the newest logged (step, epoch) pair of the
    first state that has one (the newest: the latest pair has the most digits)."""
    best = None
    for _, state in states:
        if best is not None:
            break
        history = state.get("log_history")
        for entry in history if isinstance(history, list) else ():
            if not isinstance(entry, dict):
                continue
            step, epoch = entry.get("step"), entry.get("epoch")
            if isinstance(step, int) and isinstance(epoch, (int, float)) \
                    and not isinstance(epoch, bool) and epoch > 0 and step > 0 \
                    and (best is None or step > best[0]):
                best = (step, float(epoch))
    return best[0] / best[1] if best else None


def best_model_fields(run_dir: Path) -> dict | None:
    """The model an HF run with `load_best_model_at_end` delivers, in the fields of the itera
    callback's `best_model` event (`tui.engine.conclusion.delivered`), from the newest
    checkpoint's `trainer_state.json` and `training_args.bin`: None unless the arguments
    say load_best_model_at_end was on (without it HF still tracks a best checkpoint, but
    the model at the end is the last) and the best folder is a real folder beside it."""
    run_dir = Path(run_dir)
    for folder, state in checkpoint_states(run_dir):
        best = state.get("best_model_checkpoint")
        if not isinstance(best, str) or not best:
            continue
        args = training_args(folder)
        if args.get("load_best_model_at_end") is not True:
            return None
        name = best.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        path = folder.parent / name  # HF writes every checkpoint into its output_dir
        try:
            if name in ("", ".", "..") or not stat.S_ISDIR(os.lstat(path).st_mode):
                return None
            relative = path.relative_to(run_dir).as_posix()
        except (OSError, ValueError):
            return None
        step = state.get("best_global_step")
        if not isinstance(step, int) or isinstance(step, bool):
            tail = name.rsplit("-", 1)[-1]
            step = int(tail) if tail.isdigit() else None
        metric = args.get("metric_for_best_model")
        metric = metric if isinstance(metric, str) and metric else "loss"
        if not metric.startswith("eval_"):
            metric = f"eval_{metric}"  # as HF itself looks it up in the metrics
        return {"path": relative, "best_step": step,
                "metric": metric, "value": state.get("best_metric")}
    return None
