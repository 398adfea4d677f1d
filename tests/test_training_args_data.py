"""An HF `training_args.bin` read as data: no class it names is imported, no code it holds runs.

Fast and torch-free for the hostile cases (pickles written by hand); the real
`TrainingArguments` / TRL `SFTConfig` files are in test_training_loaders.py.
"""

import io
import os
import pickle
import pickletools
import zipfile

import pytest

from tui.training.args_data import MAX_GLOBALS, NotTrainingArgs, read_training_args

FIELDS = {"output_dir": "o", "learning_rate": 2e-4, "per_device_train_batch_size": 8,
          "num_train_epochs": 3.0, "max_steps": -1, "logging_steps": 1, "max_length": 64}


def _record_pickle(state: dict, cls=b"trl.trainer.sft_config\nSFTConfig\n") -> bytes:
    """A pickle of a `cls` instance with `state`, by opcodes: NEWOBJ then BUILD."""
    body = pickle.dumps(state, protocol=2)[2:-1]  # the dict, without PROTO and STOP
    return (b"\x80\x02c" + cls + b")\x81" + body + b"b.")


def _torch_zip(path, payload: bytes):
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("training_args/data.pkl", payload)
        z.writestr("training_args/version", "3\n")
    return path


def test_a_record_of_a_foreign_class_is_read_without_importing_it(tmp_path):
    state = dict(FIELDS, strategy=None)
    payload = _record_pickle(state, cls=b"evil_pkg.never\nImported\n")
    pickletools.dis(payload, out=io.StringIO())  # a well-formed pickle
    args = read_training_args(_torch_zip(tmp_path / "training_args.bin", payload))
    assert args.cls == "evil_pkg.never.Imported" and args.get("max_length") == 64
    assert args.get("learning_rate") == 2e-4
    import sys

    assert "evil_pkg" not in sys.modules


def test_code_a_pickle_would_run_is_never_run(tmp_path):
    mark = tmp_path / "pwned"

    class Boom:
        def __reduce__(self):
            return os.system, (f"touch {mark}",)

    hidden = pickle.dumps(dict(FIELDS, callback=Boom()), protocol=2)
    with pytest.raises(NotTrainingArgs):  # the top object is a dict, not a record
        read_training_args(_torch_zip(tmp_path / "a.bin", hidden))
    # the same payload inside a field of a real-looking record: a placeholder, never called
    in_field = pickle.dumps(Boom(), protocol=2)[2:-1]
    record = (b"\x80\x02ctransformers.training_args\nTrainingArguments\n)\x81"
              + pickle.dumps(FIELDS, protocol=2)[2:-1]
              + b"X\x08\x00\x00\x00callback" + in_field + b"sb.")
    args = read_training_args(_torch_zip(tmp_path / "b.bin", record))
    assert args.fields == len(FIELDS) + 1
    assert not mark.exists()


@pytest.mark.parametrize("payload,why", [
    (b"not a pickle", "not a pickle of plain records"),
    (pickle.dumps([1, 2, 3]), "its top object is not a TrainingArguments record"),
    (b"\x80\x02" + b"".join(b"cm%d\nC\n" % i for i in range(MAX_GLOBALS + 1)) + b".",
     f"names over {MAX_GLOBALS} classes"),
])
def test_what_is_not_training_arguments_says_why(tmp_path, payload, why):
    with pytest.raises(NotTrainingArgs) as refused:
        read_training_args(_torch_zip(tmp_path / "training_args.bin", payload))
    assert why in str(refused.value)
