"""Fine-tune files on disk: a PEFT adapter folder, the files that pin a base, the data check's table.

One definition for the verifier (which checks adapters), the bundle (which
copies them and writes RELOAD.md) and the watcher: `adapter_config.json` next
to `adapter_model.safetensors` (or `.bin`) is an adapter, as
`PeftModel.save_pretrained` and TRL write it. A local base folder is pinned
by the sha256 of its `config.json` and weight files (`*.safetensors`, and the
`model*.bin` / `pytorch_model*.bin` shards) with `tree_digest`, so RELOAD.md
can repeat the same digest in ten lines of hashlib. The data check
(`tui.integrations.data_check`) writes its truncation table to
`DATA_CHECK_FILE` in its run directory, which the bundle reads. Stdlib only.
"""

from __future__ import annotations

from pathlib import Path

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = ("adapter_model.safetensors", "adapter_model.bin")
DATA_CHECK_FILE = "data_check.json"


def is_adapter(path: Path) -> bool:
    """`adapter_config.json` and `adapter_model.safetensors` (or `.bin`): a PEFT adapter."""
    path = Path(path)
    return (path / ADAPTER_CONFIG).is_file() and any((path / w).is_file()
                                                     for w in ADAPTER_WEIGHTS)


def is_base_pin_file(name: str) -> bool:
    """A file of a base model folder that its content digest covers."""
    return name == "config.json" or name.endswith(".safetensors") or (
        name.endswith(".bin") and name.startswith(("model", "pytorch_model")))
