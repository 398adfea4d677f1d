"""Capture and restore every random number generator a training step may use.

A resume is only bitwise faithful if dropout masks, shuffles and augmentations
draw the same numbers as the uninterrupted run. The states are converted to
tensors and plain types so the checkpoint loads with ``weights_only=True``.
"""

from __future__ import annotations

import random


def capture() -> dict:
    """The RNG states of this process: python, numpy, torch CPU, CUDA devices."""
    import torch

    version, internal, gauss = random.getstate()
    state: dict = {
        "python": {"version": int(version), "state": torch.tensor(internal, dtype=torch.int64),
                   "gauss": gauss},
        "numpy": _capture_numpy(),
        "torch_cpu": torch.get_rng_state(),
        "cuda": [],
    }
    # Asking for CUDA states would initialise CUDA; a process that never did
    # has default generator states, which a fresh process reproduces anyway.
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = list(torch.cuda.get_rng_state_all())
    return state


def _capture_numpy() -> dict | None:
    try:
        import numpy as np
    except ImportError:
        return None
    import torch

    name, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    return {"name": str(name), "keys": torch.from_numpy(keys.astype(np.int64)),
            "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached)}


def restore(state: dict) -> None:
    """Set every generator from `state`. Its tensors may have been loaded onto a GPU
    (`load_checkpoint(map_location="cuda")` maps all of a checkpoint's tensors):
    the generators take their states from CPU memory, so each is brought back."""
    import torch

    state = _on_cpu(state)
    py = state["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss"]))
    if state.get("numpy") is not None:
        import numpy as np

        npst = state["numpy"]
        np.random.set_state((npst["name"], npst["keys"].numpy().astype(np.uint32),
                             npst["pos"], npst["has_gauss"], npst["cached_gaussian"]))
    torch.set_rng_state(state["torch_cpu"])
    cuda_states = state.get("cuda") or []
    if cuda_states and torch.cuda.is_available():
        for index in range(min(len(cuda_states), torch.cuda.device_count())):
            torch.cuda.set_rng_state(cuda_states[index], index)


def _on_cpu(value):
    import torch

    if isinstance(value, torch.Tensor):
        return value.cpu()
    if isinstance(value, dict):
        return {key: _on_cpu(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_on_cpu(item) for item in value)
    return value
