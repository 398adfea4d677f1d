"""Are the weights in a loaded file finite? One test for every format.

A run stopped by `non_finite` often saves once more on its way out: an
adapter, a `state_dict`, a `checkpoint-N/` full of NaN. Such a file loads
perfectly, so "it reloads" is not enough for a checkpoint or an artifact to be
called usable: the verifier (`tui.training.file_check`, `loaders`, `adapters`)
runs every floating-point tensor it loaded through `non_finite` and names a
file with NaN weights as such, never "ok".

Only weights are judged: of a checkpoint that holds more than its model (a
Lightning `.ckpt`, `{"model": ..., "optimizer": ...}`, an SDK checkpoint), the
model's mapping (`WEIGHT_KEYS`); training state around it is skipped
(`NOT_WEIGHTS`: a `ModelCheckpoint` keeps `kth_value = inf` before its first
save, a loss scaler its own infinities), so a sound checkpoint is never called
broken. A NaN anywhere in a weight tensor counts. An infinity counts too,
except in a mask: a tensor whose every value is 0 or -inf/+inf (a causal
attention mask registered as a buffer, `torch.full(..., -inf).triu(1)`) is
how models are written, not a divergence.
"""

from __future__ import annotations

from collections.abc import Mapping

MAX_DEPTH = 8
WEIGHT_KEYS = ("state_dict", "model", "model_state_dict", "module", "weights")
NOT_WEIGHTS = frozenset({"callbacks", "loops", "optimizer", "optimizer_states", "optimizers",
                         "lr_schedulers", "scheduler", "scaler", "rng", "hyper_parameters",
                         "meta"})


class NonFinite(Exception):
    """Mixed into a loader's problem: the file loads, its weights hold NaN or inf. A
    verdict says so (`non_finite`) so a bundle names it as such, not as damage."""
SHOWN = 3


def _is_mask(tensor) -> bool:
    import torch

    finite = torch.isfinite(tensor)
    return bool(finite.any()) and bool((tensor[finite] == 0).all()) \
        and not bool(torch.isnan(tensor).any())


def _bad(tensor) -> bool:
    import torch

    if not tensor.is_floating_point() and not tensor.is_complex():
        return False
    if bool(torch.isfinite(tensor).all()):
        return False
    return not _is_mask(tensor)


def _walk(obj, name: str, depth: int, out: list[tuple[str, bool]]) -> None:
    import torch

    if isinstance(obj, torch.Tensor):
        out.append((name, _bad(obj.detach())))
    elif isinstance(obj, torch.nn.Module):
        _walk(obj.state_dict(), name, depth + 1, out)
    elif depth >= MAX_DEPTH:
        return
    elif isinstance(obj, Mapping):
        for key, value in obj.items():
            if depth == 0 and key in NOT_WEIGHTS:
                continue
            _walk(value, f"{name}.{key}" if name else str(key), depth + 1, out)
    elif isinstance(obj, (list, tuple)):
        for index, value in enumerate(obj):
            _walk(value, f"{name}[{index}]", depth + 1, out)


def weights_of(obj):
    """The part of a loaded object that is the model's weights (see the module doc)."""
    import torch

    if isinstance(obj, Mapping):
        found = {key: obj[key] for key in WEIGHT_KEYS
                 if isinstance(obj.get(key), (Mapping, torch.nn.Module))}
        if found:
            return found
    return obj


def non_finite(obj) -> tuple[list[str], int]:
    """(names of the tensors holding NaN or inf, how many tensors were looked at) in
    `obj`: a tensor, a mapping of them, a module, or nested dicts and lists of them."""
    found: list[tuple[str, bool]] = []
    _walk(weights_of(obj), "", 0, found)
    return [name for name, bad in found if bad], len(found)


def non_finite_problem(obj, what: str = "") -> str | None:
    """The words for a file whose tensors are not finite ("non-finite weights: 4 of 4
    tensors hold NaN or inf (a, b, c…)"), or None when every tensor is finite."""
    bad, total = non_finite(obj)
    return non_finite_words(bad, total, what) if bad else None


def non_finite_words(bad: list[str], total: int, what: str = "") -> str:
    """One wording for every format: what `non_finite_problem` says."""
    names = ", ".join(sorted(bad)[:SHOWN]) + ("…" if len(bad) > SHOWN else "")
    return (f"non-finite weights{' in ' + what if what else ''}: {len(bad)} of {total} "
            f"tensors hold NaN or inf ({names}): not usable")
