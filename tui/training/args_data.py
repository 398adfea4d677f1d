"""An HF `training_args.bin` read as data: the fields of a `TrainingArguments`, never unpickled.

`Trainer` saves its arguments with `torch.save(args)` in every `checkpoint-N/`.
The pickle names the arguments' class (`transformers.TrainingArguments`, TRL's
`trl.trainer.sft_config.SFTConfig`, any user subclass) and the enums and small
records its fields hold (`IntervalStrategy`, `accelerate.state.PartialState`...).
None of those classes is imported here: every global the pickle names becomes an
inert placeholder that only records its name and the values handed to it, so
reading the file runs no code from it, whatever it names. What comes back is a
tree of plain values; it is a training-arguments record when its top object is
a dataclass-like record with the fields every `TrainingArguments` has.

A file with tensors (a persistent id), a top object that is not such a record,
or a pickle that does not parse is not training arguments: `NotTrainingArgs`,
and the caller falls back to its usual loader (which refuses foreign classes).
Stdlib only.
"""

from __future__ import annotations

import io
import math
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path

MAX_PICKLE_BYTES = 8 << 20  # a TrainingArguments pickle is a few KiB
# fields every transformers.TrainingArguments (and so every subclass) carries
_ARGS_FIELDS = frozenset({"output_dir", "learning_rate", "per_device_train_batch_size",
                          "num_train_epochs", "max_steps", "logging_steps"})
# the fields the bundle and the ablation check care about, when present
KEPT_FIELDS = ("learning_rate", "max_length", "max_seq_length", "bf16", "fp16",
               "per_device_train_batch_size", "gradient_accumulation_steps", "max_steps",
               "num_train_epochs", "seed", "packing", "logging_nan_inf_filter")


class NotTrainingArgs(Exception):
    """The file is not an HF training-arguments pickle readable as data; why, in words."""


class _Placeholder:
    """What any global of the pickle becomes: its name, and what was handed to it."""

    qualname = "?"

    def __init__(self, *args, **kwargs):
        self.__dict__["_pickled_args"] = args

    def __reduce__(self):  # never pickled again
        raise TypeError("a placeholder of a pickled global")

    def __repr__(self) -> str:
        return f"<{self.qualname}{self.__dict__.get('_pickled_args', ())!r}>"

    @property
    def value(self):
        """An enum member's value (`IntervalStrategy("steps")` -> "steps"), else None."""
        args = self.__dict__.get("_pickled_args", ())
        return args[0] if len(args) == 1 and isinstance(args[0], (str, int, float, bool)) \
            else None


MAX_GLOBALS = 256  # distinct classes a TrainingArguments pickle names: a dozen


class _DataUnpickler(pickle.Unpickler):
    def __init__(self, file):
        super().__init__(file)
        self._placeholders: dict[str, type] = {}

    def find_class(self, module: str, name: str):
        qualname = f"{module}.{name}"
        cls = self._placeholders.get(qualname)
        if cls is None:
            if len(self._placeholders) >= MAX_GLOBALS:
                raise pickle.UnpicklingError(f"names over {MAX_GLOBALS} classes: not a record "
                                             "of training arguments")
            cls = type(name.rpartition(".")[2] or "global", (_Placeholder,),
                       {"qualname": qualname})
            self._placeholders[qualname] = cls
        return cls

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("holds tensors (a persistent id): not a record of "
                                     "training arguments")


@dataclass(frozen=True)
class TrainingArgs:
    """The training arguments a checkpoint recorded: their class, and the kept fields."""

    cls: str
    fields: int
    values: tuple[tuple[str, object], ...]

    def get(self, name: str):
        return dict(self.values).get(name)

    def summary(self) -> str:
        return f"the training arguments of {self.cls} ({self.fields} fields), read as data"


def _pickle_bytes(path: Path) -> bytes:
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith("/data.pkl")
                     or n == "data.pkl"]
            if len(names) != 1:
                raise NotTrainingArgs("not a torch zip file with one data.pkl")
            if archive.getinfo(names[0]).file_size > MAX_PICKLE_BYTES:
                raise NotTrainingArgs("data.pkl is too large to be training arguments")
            return archive.read(names[0])
    if path.stat().st_size > MAX_PICKLE_BYTES:
        raise NotTrainingArgs("too large to be training arguments")
    return path.read_bytes()  # a legacy (pre-zip) torch file: magic pickles first


def _plain(value):
    """A kept field's value as a plain number/string/bool/None (an enum by its value)."""
    if isinstance(value, _Placeholder):
        value = value.value
    if isinstance(value, float) and not math.isfinite(value):
        return value
    return value if isinstance(value, (str, int, float, bool, type(None))) else None


def read_training_args(path: Path) -> TrainingArgs:
    """The training arguments in `path`, read without importing or running anything."""
    try:
        raw = _pickle_bytes(Path(path))
        obj = _DataUnpickler(io.BytesIO(raw)).load()
    except NotTrainingArgs:
        raise
    except (OSError, zipfile.BadZipFile) as error:
        raise NotTrainingArgs(f"unreadable: {error}") from None
    except Exception as error:  # any malformed pickle is a verdict, not a crash
        raise NotTrainingArgs(f"not a pickle of plain records ({type(error).__name__}: "
                              f"{str(error)[:200]})") from None
    state = getattr(obj, "__dict__", None) if isinstance(obj, _Placeholder) else None
    if not isinstance(state, dict) or not _ARGS_FIELDS <= state.keys():
        raise NotTrainingArgs("its top object is not a TrainingArguments record")
    fields = {k: v for k, v in state.items() if k != "_pickled_args"}
    kept = tuple((name, _plain(fields[name])) for name in KEPT_FIELDS if name in fields)
    return TrainingArgs(type(obj).qualname, len(fields), kept)
