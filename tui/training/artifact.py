"""Reloadable model artifacts: the weights plus JSON metadata a bundle ships.

A checkpoint is for resuming; an artifact is for delivering: only a state dict
and the metadata needed to rebuild and trust the model (architecture, corpus
hash, metrics...). Same atomic write and sidecar as checkpoints; the metadata is
also copied into the sidecar so tools can read it without torch.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from .atomic import FORMAT_VERSION, write_torch_file

KIND = "artifact"


class ArtifactError(RuntimeError):
    """The file is not a loadable itera artifact."""


@dataclass(frozen=True)
class ArtifactInfo:
    path: Path
    sha256: str
    bytes: int
    write_s: float


def save_artifact(path: str | os.PathLike, *, state_dict, meta: dict) -> ArtifactInfo:
    """Write weights + JSON-able `meta` atomically to `path`, with a sidecar."""
    import torch

    if hasattr(state_dict, "state_dict"):
        state_dict = state_dict.state_dict()
    if not isinstance(state_dict, Mapping) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise TypeError("state_dict must be a mapping of names to tensors")
    if not isinstance(meta, dict):
        raise TypeError(f"meta must be a dict, got {type(meta).__name__}")
    try:
        meta = json.loads(json.dumps(meta))  # a plain, detached, JSON-able copy
    except (TypeError, ValueError) as error:
        raise TypeError(f"meta must be JSON-serialisable: {error}") from None
    payload = {"itera_kind": KIND, "format_version": FORMAT_VERSION,
               "state_dict": dict(state_dict), "meta": meta}
    result = write_torch_file(payload, path, kind=KIND, sidecar_extra={"meta": meta})
    return ArtifactInfo(path=result.path, sha256=result.sha256, bytes=result.bytes, write_s=result.write_s)


def load_artifact(path: str | os.PathLike, *, map_location="cpu") -> dict:
    """{"state_dict": ..., "meta": ...} of an artifact, loaded with weights_only=True."""
    import torch

    payload = torch.load(path, map_location=map_location, weights_only=True)
    if not isinstance(payload, dict) or payload.get("itera_kind") != KIND:
        kind = payload.get("itera_kind") if isinstance(payload, dict) else type(payload).__name__
        raise ArtifactError(f"{path}: not an itera artifact (kind: {kind})")
    return {"state_dict": payload["state_dict"], "meta": payload["meta"]}
