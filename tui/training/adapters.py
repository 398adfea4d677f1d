"""A PEFT adapter, checked as what it is: finite tensors, its base named and pinned, loaded onto it.

An adapter (`adapter_config.json` + `adapter_model.safetensors` or `.bin`, as
`PeftModel.save_pretrained` and TRL's `SFTTrainer` write it, in a deliverable
folder or a `checkpoint-N/`) is useless without the exact base it was trained
on. `adapter_config.json` names that base (`base_model_name_or_path`) and, when
the script passed one, its `revision`; the exact revision is pinned without a
person typing it:

- the adapter config's `revision`, when it is a commit (a branch name is
  resolved through the local hub cache when it can be, else said to move);
- a hub id: the commit of the snapshot in the local hub cache
  (`models--org--name/refs/main` -> `snapshots/<commit>`, where
  `huggingface_hub` keeps what `from_pretrained` loaded; `HF_HUB_CACHE`,
  `HF_HOME`), read from the cache itself, never from the network;
- a local folder: the content digest of its `config.json` and weights
  (`tui.campaign.files.tree_digest` of those files), the folder named as the
  adapter config names it.

A base that cannot be pinned is said, never guessed. The tensors must all be
finite (an adapter of NaN never reloads "ok"). When PEFT and transformers are
importable and the base is on this box, the adapter is loaded onto its base in
this (the verifier's fresh) process with `PeftModel.from_pretrained`, offline,
and every tensor the model then holds must equal the file's; otherwise the
record says the adapter was not loaded on its base, and why. A base heavier
than `ITERA_ADAPTER_BASE_MAX_GB` (4 GB) is not loaded: the verifier runs on
CPU beside training, and a 70B base would take the box's memory.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path, PurePosixPath

from ..campaign.finetune_files import ADAPTER_CONFIG as CONFIG
from ..campaign.finetune_files import ADAPTER_WEIGHTS as WEIGHTS
from ..campaign.finetune_files import is_adapter, is_base_pin_file
from ..campaign.files import tree_digest
from .atomic import file_sha256
from .finite import NonFinite, non_finite, non_finite_words

__all__ = ["AdapterProblem", "AdapterRecord", "BasePin", "check_adapter", "is_adapter",
           "pin_base"]
_COMMIT = re.compile(r"[0-9a-f]{40}")
_SNAPSHOT = re.compile(r"models--([^/]+)/snapshots/([0-9a-f]{40})(/|$)")
_TASKS = {"CAUSAL_LM": "AutoModelForCausalLM", "SEQ_CLS": "AutoModelForSequenceClassification",
          "SEQ_2_SEQ_LM": "AutoModelForSeq2SeqLM", "TOKEN_CLS": "AutoModelForTokenClassification",
          "QUESTION_ANS": "AutoModelForQuestionAnswering"}


BASE_LIMIT_ENV = "ITERA_ADAPTER_BASE_MAX_GB"
BASE_LIMIT_GB = 4.0  # a base loaded on CPU beside training: a 1-2B model at most


def _base_limit() -> float:
    try:
        return float(os.environ.get(BASE_LIMIT_ENV) or BASE_LIMIT_GB) * 1e9
    except ValueError:
        return BASE_LIMIT_GB * 1e9


class AdapterProblem(Exception):
    """What is wrong with the adapter, in words (a failed verification)."""


class NonFiniteAdapter(NonFinite, AdapterProblem):
    """The adapter loads, but its tensors hold NaN or inf."""


@dataclass(frozen=True)
class BasePin:
    """The base an adapter needs, and how exactly it is known."""

    base: str  # as the adapter config names it (an absolute path shown by its folder name)
    kind: str  # hub | local | unknown
    revision: str | None  # a commit, or sha256:<digest> of a local folder's config + weights
    pinned_by: str | None  # adapter_config | hub_cache | content_digest | None
    why_not: str | None = None  # when revision is None (or a moving name): why
    folder: Path | None = None  # where the base is on this box (never written out)


@dataclass(frozen=True)
class AdapterRecord:
    """What the verifier found about an adapter (JSON in its verdict)."""

    base: str
    base_kind: str
    revision: str | None
    pinned_by: str | None
    unpinned: str | None
    loaded_on_base: bool
    load_note: str
    tensors: int
    peft_type: str | None = None
    task_type: str | None = None
    r: int | None = None
    lora_alpha: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def hub_cache() -> Path:
    """Where huggingface_hub keeps downloads (its own environment variables, in its order)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(xdg) / "huggingface" / "hub"


def shown(name: str) -> str:
    """A base as a bundle may show it: never an absolute path of this machine."""
    return f"<absolute path>/{PurePosixPath(name).name}" if os.path.isabs(name) else name


def local_digest(folder: Path) -> str:
    """sha256 (tree_digest) of a model folder's config.json and weight files."""
    entries = [(p.name, file_sha256(p)[0]) for p in sorted(folder.iterdir())
               if p.is_file() and is_base_pin_file(p.name)]
    if not any(name != "config.json" for name, _ in entries):
        raise AdapterProblem(f"base folder {folder.name!r} holds no weights")
    return "sha256:" + tree_digest(entries)


def _cache_commit(repo: str, revision: str | None) -> tuple[str | None, Path | None, str]:
    """(commit, snapshot folder, why not) of a hub id in the local cache."""
    folder = hub_cache() / ("models--" + repo.replace("/", "--"))
    if not folder.is_dir():
        return None, None, f"{repo} is not in the local hub cache (HF_HUB_CACHE / HF_HOME)"
    ref = revision or "main"
    if ".." in Path(ref).parts or ref.startswith("/"):
        return None, None, f"revision {ref!r} is not a name the hub cache can hold"
    commit = None
    if _COMMIT.fullmatch(ref):
        commit = ref
    else:
        try:
            commit = (folder / "refs" / ref).read_text().strip()
        except OSError:
            snapshots = [p.name for p in (folder / "snapshots").glob("*") if p.is_dir()]
            if revision is None and len(snapshots) == 1:
                commit = snapshots[0]
            else:
                return None, None, (f"the hub cache of {repo} has no refs/{ref} and "
                                    f"{len(snapshots)} snapshots: which one was loaded is "
                                    "not known")
    snapshot = folder / "snapshots" / commit
    if not _COMMIT.fullmatch(commit) or not snapshot.is_dir():
        return None, None, f"the hub cache of {repo} has no snapshot {commit[:40]!r}"
    return commit, snapshot, ""


def pin_base(config: dict, roots: list[Path]) -> BasePin:
    """The exact base of an adapter config; `roots`: folders a relative base is under."""
    name = config.get("base_model_name_or_path")
    revision = config.get("revision")
    revision = revision if isinstance(revision, str) and revision else None
    if not isinstance(name, str) or not name:
        return BasePin("?", "unknown", None, None, "adapter_config.json names no base model")
    snapshot = _SNAPSHOT.search(name.replace(os.sep, "/"))
    candidates = [Path(name)] if os.path.isabs(name) else [root / name for root in roots]
    folder = next((c for c in candidates if (c / "config.json").is_file()), None)
    if snapshot:  # loaded by the path of a hub-cache snapshot: the path says the commit
        repo = snapshot.group(1).replace("--", "/")
        return BasePin(repo, "hub", snapshot.group(2), "hub_cache", folder=folder)
    if folder is not None:
        if revision and _COMMIT.fullmatch(revision):
            return BasePin(shown(name), "local", revision, "adapter_config", folder=folder)
        return BasePin(shown(name), "local", local_digest(folder), "content_digest",
                       folder=folder)
    if os.path.isabs(name) or name.startswith((".", "~")) or name.count("/") > 1:
        exact = bool(revision and _COMMIT.fullmatch(revision))
        return BasePin(shown(name), "unknown", revision, "adapter_config" if revision else None,
                       None if exact else f"the base folder {shown(name)!r} is not on this box")
    commit, snapshot_dir, why = _cache_commit(name, revision)
    if commit:
        by = "adapter_config" if revision == commit else "hub_cache"
        return BasePin(name, "hub", commit, by, folder=snapshot_dir)
    if revision:
        moving = None if _COMMIT.fullmatch(revision) else (
            f"revision {revision!r} is a name, not a commit: it can move ({why})")
        return BasePin(name, "hub", revision, "adapter_config", moving)
    return BasePin(name, "hub", None, None, why)


def _read_config(path: Path) -> dict:
    try:
        config = json.loads((path / CONFIG).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as error:
        raise AdapterProblem(f"{CONFIG}: not valid JSON ({error})") from None
    if not isinstance(config, dict):
        raise AdapterProblem(f"{CONFIG}: not a JSON object")
    return config


def _tensors(path: Path) -> dict:
    """The adapter's tensors by name (safetensors, else a weights-only torch load)."""
    import torch

    file = next(path / w for w in WEIGHTS if (path / w).is_file())
    try:
        if file.suffix == ".safetensors":
            from safetensors.torch import load_file

            tensors = load_file(str(file))
        else:
            tensors = torch.load(file, map_location="cpu", weights_only=True)
    except Exception as error:  # the loader's verdict, not a crash
        raise AdapterProblem(f"{file.name}: not loadable ({type(error).__name__}: "
                             f"{str(error)[:200]})") from None
    if not isinstance(tensors, dict) or not tensors or not all(
            isinstance(v, torch.Tensor) for v in tensors.values()):
        raise AdapterProblem(f"{file.name}: not a mapping of tensors")
    bad, total = non_finite(tensors)  # one finite test for every format (tui.training.finite)
    if bad:
        raise NonFiniteAdapter(f"{file.name}: {non_finite_words(bad, total)}")
    return tensors


def _load_on_base(path: Path, pin: BasePin, config: dict, tensors: dict) -> tuple[bool, str]:
    """(loaded, note): the adapter loaded onto its base here, offline, and compared."""
    if pin.folder is None:
        why = pin.why_not or f"{pin.base} at {pin.revision} is neither a folder nor in the " \
            "local hub cache"
        return False, f"not loaded on its base: the base is not on this box ({why})"
    size = sum(p.stat().st_size for p in pin.folder.iterdir()
               if p.is_file() and p.name != "config.json" and is_base_pin_file(p.name))
    limit = _base_limit()
    if size > limit:
        return False, (f"not loaded on its base: the base weighs {size / 1e9:.1f} GB, over "
                       f"the {limit / 1e9:.1f} GB the verifier loads on CPU "
                       f"({BASE_LIMIT_ENV}); its tensors were checked")
    os.environ["HF_HUB_OFFLINE"] = "1"  # the verifier never downloads
    try:
        import peft
        import transformers
    except ImportError as error:
        return False, (f"not loaded on its base: {error.name or 'peft'} is not importable here "
                       "(pip install 'itera-tui[peft]'); its tensors were checked")
    import torch

    auto = getattr(transformers, _TASKS.get(config.get("task_type"), "AutoModel"))
    try:
        base = auto.from_pretrained(str(pin.folder), local_files_only=True)
        model = peft.PeftModel.from_pretrained(base, str(path), local_files_only=True)
        loaded = peft.get_peft_model_state_dict(model)
    except Exception as error:  # the load is the verdict
        raise AdapterProblem(f"does not load onto its base {pin.base}: {type(error).__name__}: "
                             f"{str(error).strip().splitlines()[0][:200] if str(error) else ''}"
                             ) from None
    missing = sorted(set(tensors) - set(loaded))
    differ = sorted(k for k in set(tensors) & set(loaded)
                    if not torch.equal(loaded[k].cpu().to(tensors[k].dtype), tensors[k]))
    if missing or differ:
        raise AdapterProblem(f"loaded onto its base {pin.base}, but {len(missing)} tensors are "
                             f"missing and {len(differ)} differ from the file "
                             f"({', '.join((missing + differ)[:3])})")
    return True, (f"loaded onto its base with PEFT {peft.__version__} (transformers "
                  f"{transformers.__version__}): {len(tensors)} tensors, equal to the file's")


def check_adapter(path: Path, roots: list[Path]) -> AdapterRecord:
    """Check an adapter folder; raise AdapterProblem when it is not usable."""
    config = _read_config(path)
    tensors = _tensors(path)
    pin = pin_base(config, roots)
    loaded, note = _load_on_base(path, pin, config, tensors)
    r, alpha = config.get("r"), config.get("lora_alpha")
    return AdapterRecord(
        pin.base, pin.kind, pin.revision, pin.pinned_by, pin.why_not, loaded, note,
        len(tensors), _text(config.get("peft_type")), _text(config.get("task_type")),
        r if isinstance(r, int) and not isinstance(r, bool) else None,
        float(alpha) if isinstance(alpha, (int, float)) and not isinstance(alpha, bool) else None)


def _text(value) -> str | None:
    return value if isinstance(value, str) else None
