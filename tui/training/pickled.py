"""Which classes a pickled torch file may bring back, decided before anything is unpickled.

A whole pickled module (`torch.save(model, f)`, as pytorch/examples'
word_language_model saves it) names the classes it needs to be rebuilt.
`torch.serialization.get_unsafe_globals_in_checkpoint` lists them by reading
the pickle's opcodes, without running any of it; this module sorts each name:

- a class of `torch.nn` that is a `Module` or a `Parameter`, and a function of
  torch's neural-network namespaces (`torch.nn.functional.relu`, which
  `nn.TransformerEncoderLayer` stores, `torch._C._nn.gelu`, `torch.nn.init.*`):
  what `torch.load(weights_only=True)` loads once they are given to
  `safe_globals`. Other torch callables (`torch.hub.load`,
  `torch.utils.cpp_extension.load`, `torch.load`) are not;
- numpy's array reconstruction (the same short list `transformers` allows for
  the numpy RNG state in an HF checkpoint's `rng_state.pth`);
- a class or function defined in the campaign's own folder (`code_dir`: the
  campaign folder during a campaign, the copy in `code/` of a bundle), imported
  from there;
- anything else (`posix.system`, `builtins.eval`, a class from an unknown
  package, a class of the `__main__` script) is refused by name.

A file needing any refused name is never unpickled; the allowed ones go to
`torch.serialization.safe_globals` for a `weights_only=True` load, so the
weights-only unpickler still guards everything else in the file.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import sys
import tempfile
import types
from dataclasses import dataclass
from pathlib import Path

NUMPY_DATA = frozenset({
    "numpy.core.multiarray._reconstruct", "numpy._core.multiarray._reconstruct",
    "numpy.core.multiarray.scalar", "numpy._core.multiarray.scalar",
    "numpy.ndarray", "numpy.dtype"})
# torch's namespaces of plain tensor functions a pickled module may hold (an activation)
TORCH_FUNCTION_MODULES = frozenset({"torch.nn.functional", "torch._C._nn", "torch.nn.init"})
_NUMPY_DTYPE = re.compile(r"numpy\.dtypes\.[A-Za-z0-9]+DType")
# names no campaign module may take: the interpreter's and the frameworks' own
_NOT_CAMPAIGN = frozenset({"__main__", "torch", "numpy", "tui", "transformers", "lightning",
                           "pytorch_lightning", "safetensors", "builtins"})


class Refused(Exception):
    """The file needs globals that may not be unpickled; `names` says which."""

    def __init__(self, message: str, names: tuple[str, ...]):
        super().__init__(message)
        self.names = names


@dataclass(frozen=True)
class Allowance:
    """What a load may use: (object, name) pairs for `safe_globals`, names by origin."""

    pairs: tuple
    torch: tuple[str, ...] = ()
    numpy: tuple[str, ...] = ()
    campaign: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        return self.torch + self.numpy + self.campaign


def _campaign_file(code_dir: Path | None, module: str) -> Path | None:
    """The .py file of `module` inside `code_dir`, if the campaign defines it."""
    if code_dir is None:
        return None
    top = module.split(".")[0]
    if top in _NOT_CAMPAIGN or top in sys.stdlib_module_names:
        return None
    parts = module.split(".")
    for candidate in (code_dir.joinpath(*parts).with_suffix(".py"),
                      code_dir.joinpath(*parts, "__init__.py")):
        if candidate.is_file():
            return candidate
    return None


def _origin(name: str, code_dir: Path | None) -> str:
    module, _, attr = name.rpartition(".")
    if not module or not attr:
        return "foreign"
    if name in NUMPY_DATA or _NUMPY_DTYPE.fullmatch(name):
        return "numpy"
    if (module.startswith("torch.nn.") or module in TORCH_FUNCTION_MODULES) \
            and attr.isidentifier() and not attr.startswith("__"):
        return "torch"
    if _campaign_file(code_dir, module) is not None:
        return "campaign"
    return "main" if module == "__main__" else "foreign"


def _refusal(names: list[str], mains: list[str]) -> Refused:
    parts = []
    if names:
        parts.append("needs " + ", ".join(names) + " (neither torch's nor the campaign's own"
                     " classes): not unpickled")
    if mains:
        parts.append("needs " + ", ".join(mains) + " defined in the training script itself "
                     "(__main__): not unpickled; define the class in a module file of the "
                     "campaign folder to make the file reloadable")
    return Refused("; ".join(parts), tuple(names + mains))


def _resolve_torch(name: str):
    import torch

    module, _, attr = name.rpartition(".")
    obj = getattr(importlib.import_module(module), attr, None)
    if isinstance(obj, type) and issubclass(obj, (torch.nn.Module, torch.nn.Parameter)):
        return obj
    if module in TORCH_FUNCTION_MODULES and _is_function(obj) and not attr.startswith("_") \
            and "torch_function" not in attr:  # not the dispatch helpers
        return obj
    return None


def _is_function(obj) -> bool:
    """A plain function (Python or built-in), not a class, module or bound method of one."""
    return isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)) and not \
        isinstance(getattr(obj, "__self__", None), type)


def _resolve_campaign(name: str, code_dir: Path):
    module, _, attr = name.rpartition(".")
    home = os.path.realpath(code_dir)
    if home not in sys.path:
        sys.path.append(home)  # last: a json.py or torch.py there never shadows the real one
    importlib.invalidate_caches()
    loaded = sys.modules.get(module)
    if loaded is None:
        with _own_bytecode_cache():
            loaded = importlib.import_module(module)
    where = os.path.realpath(getattr(loaded, "__file__", "") or "")
    if os.path.commonpath([home, where]) != home:
        raise Refused(f"needs {name}, but a module {module!r} from another folder is already "
                      "loaded in this verifier: verify this file on its own", (name,))
    obj = getattr(loaded, attr, None)
    if isinstance(obj, type) or isinstance(obj, types.FunctionType):
        return obj if obj.__module__ == module else None
    return None


@contextlib.contextmanager
def _own_bytecode_cache():
    """Import with an empty cache of this process's own: a `__pycache__` inside the
    bundle is not listed in its manifest (verify names it as extra), so it is never
    read in place of the checked source."""
    before = sys.pycache_prefix
    with tempfile.TemporaryDirectory(prefix="itera-pyc-") as prefix:
        sys.pycache_prefix = prefix
        try:
            yield
        finally:
            sys.pycache_prefix = before


def _numpy_dtypes() -> list:
    """numpy's dtype classes (`numpy.dtypes.UInt32DType`...): an array's dtype names
    one only once it is being rebuilt, so the listing cannot see it in advance."""
    import numpy

    dtypes = getattr(numpy, "dtypes", None)
    return [(cls, f"numpy.dtypes.{name}") for name, cls in vars(dtypes or object).items()
            if name.endswith("DType") and isinstance(cls, type)]


def allowance(names: list[str] | None, code_dir: Path | None) -> Allowance:
    """Sort the unsafe globals a file needs; raise Refused unless every one is allowed.

    Nothing foreign is imported or unpickled: the names are sorted by their text
    first, and only when none is refused are torch's and the campaign's imported."""
    names = sorted(set(names or ()))
    origin = {name: _origin(name, code_dir) for name in names}
    foreign = [n for n in names if origin[n] == "foreign"]
    mains = [n for n in names if origin[n] == "main"]
    if foreign or mains:
        raise _refusal(foreign, mains)
    objects, by_origin = [], {"torch": [], "numpy": [], "campaign": []}
    for name in names:
        try:
            if origin[name] == "torch":
                obj = _resolve_torch(name)
            elif origin[name] == "campaign":
                obj = _resolve_campaign(name, code_dir)
            else:
                module, _, attr = name.rpartition(".")
                obj = getattr(importlib.import_module(module), attr, None)
        except Refused:
            raise
        except Exception as error:  # an import that fails is a verdict, not a crash
            raise Refused(f"needs {name}, which cannot be imported here: "
                          f"{type(error).__name__}: {str(error)[:200]}", (name,)) from None
        if obj is None:
            raise Refused(f"needs {name}, which is not a class this verifier may rebuild "
                          f"({origin[name]} name, but neither a Module/Parameter class nor "
                          "a function of torch.nn.functional / torch.nn.init)", (name,))
        objects.append((obj, name))
        by_origin[origin[name]].append(name)
    if by_origin["numpy"]:
        objects += _numpy_dtypes()
    return Allowance(tuple(objects), tuple(by_origin["torch"]), tuple(by_origin["numpy"]),
                     tuple(by_origin["campaign"]))
