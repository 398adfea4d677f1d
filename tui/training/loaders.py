"""Reload checks for files the SDK did not write: plain torch, Lightning, safetensors, HF.

People train with `torch.save`, Lightning's `ModelCheckpoint`, Hugging Face's
`Trainer` and `safetensors`; their files carry no tui.training sidecar, yet a
bundle may only call them verified once they load in a fresh process. Each
format gets its field's own loader:

- `.pt` / `.pth` / `.bin` / `.ckpt`: `torch.load(weights_only=True)`, with the
  classes a pickled module needs allowed by name first (see `pickled`), so
  opening a file never runs code it was not meant to run;
- `.safetensors`: the `safetensors` package, every tensor read;
- a directory (an HF `checkpoint-N/` or a `save_pretrained` folder): every file,
  safetensors and torch files as above, JSON parsed, weights required; its
  sha256 is `tui.campaign.files.tree_digest`, as the SDK and the watcher hash it.
  A PEFT adapter (`adapter_config.json` + `adapter_model.*`) is also checked as
  one (`adapters`: finite tensors, its base pinned, loaded onto it).

Each check returns frozen `Facts` or raises `Problem` with the reason in words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..campaign.files import NotATree, tree_digest, tree_files
from .atomic import file_sha256, sidecar_path
from .adapters import AdapterProblem, check_adapter, is_adapter
from .args_data import NotTrainingArgs, read_training_args
from .finite import NonFinite, non_finite, non_finite_problem, non_finite_words
from .pickled import Refused, allowance

TORCH_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")
SAFETENSORS_SUFFIX = ".safetensors"
_HF_STEP = re.compile(r"checkpoint-(\d+)")
# an HF checkpoint's record of its TrainingArguments (of any subclass: TRL's SFTConfig...):
# HF's own resume never loads it; kept and read as data (`args_data`), never unpickled
_HF_ARGS = "training_args.bin"


class Problem(Exception):
    """What is wrong with the file, in words for the user."""

    def within(self, where: str) -> "Problem":
        """The same problem (and kind), named inside `where` (a directory's file)."""
        return type(self)(f"{where}: {self}")


class NonFiniteProblem(NonFinite, Problem):
    """It loads, but its weights hold NaN or inf (see `tui.training.finite`)."""


@dataclass(frozen=True)
class Facts:
    format: str  # itera | torch | lightning | safetensors | hf
    kind: str  # checkpoint | artifact | module | state_dict | tensors | model | object
    summary: str
    step: int | None = None
    sha256: str | None = None
    bytes: int | None = None
    files: int = 1
    needs: tuple[str, ...] = ()  # globals allowed for the load (torch / numpy / campaign)
    notes: tuple[str, ...] = ()
    adapter: dict | None = None  # a PEFT adapter: its base, pinned revision, load on base


def first_line(error: BaseException) -> str:
    """The error's first line; with its type when the text alone says little ("101")."""
    line = (str(error).strip().splitlines() or [""])[0][:300]
    return line if len(line) >= 20 else f"{type(error).__name__}: {line}".rstrip(": ")


def missing_sidecar(path: Path) -> Problem:
    """An SDK checkpoint is two files, the weights and their sidecar (size, digest, step):
    a copy that carried only the first is the usual cause, named first; a save cut
    between its two renames (tui.training.atomic) is the other."""
    return Problem(f"sidecar {sidecar_path(path).name} is not beside {path.name} (a "
                   "tui.training checkpoint is both files: copied or fetched without it, a "
                   "save cut before its sidecar landed, or not written by tui.training)")


def _describe(obj, path: Path) -> tuple[str, str, str, int | None]:
    """(format, kind, summary, step) of a weights-only-loaded object."""
    import torch

    if isinstance(obj, torch.nn.Module):
        n = sum(p.numel() for p in obj.parameters())
        cls = f"{type(obj).__module__}.{type(obj).__qualname__}"
        return "torch", "module", f"a pickled {cls} module ({n} parameters)", None
    if isinstance(obj, Mapping):
        if "itera_kind" in obj:
            raise missing_sidecar(path)
        if isinstance(obj.get("state_dict"), Mapping) and (
                "pytorch-lightning_version" in obj or "global_step" in obj):
            step = obj.get("global_step")
            step = step if isinstance(step, int) and not isinstance(step, bool) else None
            _tensors_only(obj["state_dict"], "state_dict")
            return ("lightning", "checkpoint", f"a Lightning checkpoint ({len(obj['state_dict'])}"
                    f" tensors, epoch {obj.get('epoch')}, step {step})", step)
        if obj and all(isinstance(v, torch.Tensor) for v in obj.values()):
            return "torch", "state_dict", f"a state dict of {len(obj)} tensors", None
        held = held_step(obj)
        if held is not None:  # a training state a script saved by itself (nanoGPT's ckpt.pt)
            key, step = held
            return ("torch", "checkpoint", f"a {type(obj).__name__} of {len(obj)} entries "
                    f"({key} {step})", step)
        return "torch", "object", f"a {type(obj).__name__} of {len(obj)} entries", None
    if isinstance(obj, torch.Tensor):
        return "torch", "tensors", f"a tensor of shape {tuple(obj.shape)}", None
    return "torch", "object", f"a {type(obj).__name__}", None


# the step a training state saved with a plain torch.save names at its top level:
# nanoGPT's `iter_num`, then the names other loops use
STEP_KEYS = ("iter_num", "global_step", "step")


def held_step(obj: Mapping) -> tuple[str, int] | None:
    """(key, step) a checkpoint dict holds at its top level (a non-negative int, never a
    bool or a tensor), else None."""
    for key in STEP_KEYS:
        value = obj.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return key, value
    return None


def _tensors_only(mapping: Mapping, what: str) -> None:
    import torch

    for key, value in mapping.items():
        if not isinstance(value, torch.Tensor):
            raise Problem(f"{what}[{key!r}] is a {type(value).__name__}, not a tensor")


def _unsafe_globals(path: Path) -> list[str] | None:
    """The globals the file needs beyond torch's defaults; None for a legacy
    (pre-zip) torch file, whose names cannot be listed (its load still guards)."""
    from torch.serialization import get_unsafe_globals_in_checkpoint

    try:
        return get_unsafe_globals_in_checkpoint(path)
    except Exception:  # not a zip torch file: let torch.load say what it is
        return None


def needed_globals(path: Path) -> list[str]:
    """Every global a torch file (or the torch files of a directory) needs beyond
    torch's defaults, read from the pickles without running them."""
    files = [path] if path.is_file() else [
        p for _, p in tree_files(path) if p.name.lower().endswith(TORCH_SUFFIXES)]
    names: set[str] = set()
    for item in files:
        if item.name.lower().endswith(SAFETENSORS_SUFFIX) or sidecar_path(item).exists():
            continue
        names.update(_unsafe_globals(item) or ())
    return sorted(names)


def load_torch(path: Path, code_dir: Path | None):
    """(object, Allowance) of a torch file loaded with weights_only=True; Refused
    (a Problem) before anything is unpickled when it needs a name not allowed."""
    import torch

    needs = _unsafe_globals(path)
    grant = allowance(needs, code_dir)  # raises Refused, naming what was refused
    try:
        with torch.serialization.safe_globals(list(grant.pairs)):
            obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # any failure to load is the verdict, not a crash
        raise Problem(f"not a loadable torch file (weights_only): {first_line(error)}") from None
    return obj, grant


def check_torch(path: Path, code_dir: Path | None, known_sha256: str | None = None) -> Facts:
    try:
        obj, grant = load_torch(path, code_dir)
    except Refused as refused:
        raise Problem(str(refused)) from None
    fmt, kind, summary, step = _describe(obj, path)
    problem = non_finite_problem(obj)
    if problem:
        raise NonFiniteProblem(problem)
    sha, size = (known_sha256, path.stat().st_size) if known_sha256 else file_sha256(path)
    return Facts(fmt, kind, summary, step, sha, size, needs=grant.names)


def check_safetensors(path: Path, known_sha256: str | None = None) -> Facts:
    try:
        from safetensors import safe_open
    except ImportError as error:
        raise Problem(f"safetensors is not importable here: {error}") from None
    try:
        with safe_open(str(path), framework="pt") as f:
            keys = list(f.keys())
            bad = [key for key in keys if non_finite(f.get_tensor(key))[0]]
    except Exception as error:
        raise Problem(f"not a loadable safetensors file: {first_line(error)}") from None
    if bad:  # read one tensor at a time (a large file is never held whole)
        raise NonFiniteProblem(non_finite_words(bad, len(keys)))
    sha, size = (known_sha256, path.stat().st_size) if known_sha256 else file_sha256(path)
    return Facts("safetensors", "tensors", f"{len(keys)} tensors (safetensors)", None, sha, size)


def check_file(path: Path, code_dir: Path | None, known_sha256: str | None = None) -> Facts:
    """A file with no sidecar: chosen by its name, else by its first bytes."""
    name = path.name.lower()
    if name.endswith(SAFETENSORS_SUFFIX):
        return check_safetensors(path, known_sha256)
    if name == _HF_ARGS:
        try:
            args = read_training_args(path)
        except NotTrainingArgs:
            pass
        else:
            sha, size = (known_sha256, path.stat().st_size) if known_sha256 \
                else file_sha256(path)
            return Facts("hf", "object", args.summary(), None, sha, size)
    if name.endswith(TORCH_SUFFIXES):
        return check_torch(path, code_dir, known_sha256)
    with open(path, "rb") as f:
        head = f.read(9)
    if head[:2] == b"PK":
        return check_torch(path, code_dir, known_sha256)
    if len(head) == 9 and head[8:9] == b"{":
        return check_safetensors(path, known_sha256)
    raise Problem("unknown format: not a torch (.pt/.pth/.bin/.ckpt), safetensors or "
                  "checkpoint directory")


def _dir_file(path: Path, rel: str, code_dir: Path | None) -> tuple[Facts | None, str | None]:
    """(facts, note) of one file of a checkpoint directory; Problem names the file."""
    low = path.name.lower()
    try:
        if low.endswith(SAFETENSORS_SUFFIX):
            return check_safetensors(path), None
        if low == _HF_ARGS:
            try:
                return None, f"{rel}: {read_training_args(path).summary()}, never unpickled"
            except NotTrainingArgs:
                pass  # not HF's record: loaded as any torch file below
        if low.endswith(TORCH_SUFFIXES):
            return check_torch(path, code_dir), None
        if low.endswith(".json"):
            json.loads(path.read_text(encoding="utf-8"))
        return None, None
    except Problem as problem:
        raise problem.within(rel) from None
    except (OSError, ValueError, RecursionError) as error:
        raise Problem(f"{rel}: not valid JSON ({first_line(error)})") from None


def check_dir(path: Path, code_dir: Path | None) -> Facts:
    """An HF `checkpoint-N/` or `save_pretrained` directory: every file must load."""
    entries, notes, needs, weights, size = [], [], [], 0, 0
    try:
        files = tree_files(path)
    except NotATree as error:
        raise Problem(f"{error} inside the checkpoint directory") from None
    for rel, item in files:
        facts, note = _dir_file(item, rel, code_dir)
        if note:
            notes.append(note)
        if facts is not None:
            needs += facts.needs
            weights += facts.format == "lightning" or facts.format in (
                "safetensors", "torch") and facts.kind in ("tensors", "state_dict", "module")
        sha, n = file_sha256(item) if facts is None or facts.sha256 is None else (
            facts.sha256, facts.bytes or 0)
        entries.append((rel, sha))
        size += n
    if not entries:
        raise Problem("empty directory: no checkpoint files")
    if not weights:
        raise Problem("no model weights in the directory (*.safetensors, pytorch_model.bin)")
    step = _hf_step(path)
    kind = "checkpoint" if step is not None or (path / "trainer_state.json").is_file() \
        else "model"
    summary, adapter = f"{len(entries)} files, {weights} weight files", None
    if is_adapter(path):
        try:
            record = check_adapter(path, [p for p in (code_dir, Path.cwd()) if p is not None])
        except AdapterProblem as problem:
            kind = NonFiniteProblem if isinstance(problem, NonFinite) else Problem
            raise kind(f"adapter: {problem}") from None
        kind = "checkpoint" if kind == "checkpoint" else "adapter"
        adapter = record.to_dict()
        summary = (f"a {record.peft_type or 'PEFT'} adapter (r={record.r}) on "
                   f"{record.base}, {summary}")
    return Facts("hf", kind, summary, step, tree_digest(entries), size, files=len(entries),
                 needs=tuple(sorted(set(needs))), notes=tuple(notes), adapter=adapter)


def _hf_step(path: Path) -> int | None:
    try:
        step = json.loads((path / "trainer_state.json").read_text()).get("global_step")
        if isinstance(step, int) and not isinstance(step, bool):
            return step
    except (OSError, ValueError, AttributeError, RecursionError):
        pass
    m = _HF_STEP.fullmatch(path.name)
    return int(m.group(1)) if m else None
