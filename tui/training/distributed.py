"""The few torch.distributed collectives the SDK needs, and nothing when it is off.

Under data parallelism every rank must checkpoint at the same step (a rank that
saves while another steps deadlocks the next collective), only rank 0 writes,
and each rank's RNG state is kept. When torch was never imported, or
torch.distributed is not initialised, every helper is a cheap local answer.
"""

from __future__ import annotations

import sys


def _dist():
    if "torch" not in sys.modules:
        return None
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist
    return None


def rank() -> int:
    dist = _dist()
    return dist.get_rank() if dist else 0


def world_size() -> int:
    dist = _dist()
    return dist.get_world_size() if dist else 1


def any_rank(flag: bool) -> bool:
    """True on every rank when `flag` is True on at least one (all_reduce MAX)."""
    dist = _dist()
    if dist is None:
        return bool(flag)
    import torch

    device = "cpu"
    if dist.get_backend() == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())


def gather_all(obj) -> list:
    """`obj` from every rank, in rank order (a one-item list without distributed)."""
    dist = _dist()
    if dist is None:
        return [obj]
    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out
