"""Reload a bundle's checkpoints and artifacts in ONE fresh process, the only place torch runs.

A file that is present but cannot be reloaded is not a verified output. The
check runs in `python -m tui.training.file_check --serve`, a new interpreter that
is not the writer (and never the caller, which stays free of torch), started
once for the whole bundle: torch is imported once, every file is a request
(SDK files against their sidecar, foreign ones with their format's loader,
checkpoint directories as one unit), and the process is reaped at the end.
The wrap-up keeps one `Reloader` across the build and the checks of its
bundle; `itera-tui verify` opens one of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..engine.checkpoints.verifier import VerifierClient

RELOAD_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class Target:
    """One reload check: a file or a checkpoint directory of the bundle."""

    rel: str  # bundle-relative
    full: Path
    known_sha256: str | None = None  # the caller just hashed these bytes (files only)


class Reloader:
    """The bundle's verifier process, started on the first request; close() reaps it."""

    def __init__(self, client: VerifierClient | None = None):
        self.client = client or VerifierClient(timeout_s=RELOAD_TIMEOUT_S)

    def one(self, path: Path, code_dir: Path | None = None) -> dict:
        return self.client.verify(path, code_dir=code_dir).to_dict()

    def needs(self, paths: list[Path]) -> dict[Path, list[str]]:
        """The classes each torch file's pickle needs (nothing unpickled)."""
        ids = {self.client.submit(p, op="globals"): p for p in paths}
        out = {p: [] for p in paths}
        for verdict in self._collect(ids):
            out[ids[verdict.id]] = list(verdict.needs)
        return out

    def many(self, targets: list[Target], code_dir: Path | None = None,
             progress: Callable[[str], None] | None = None) -> dict[str, dict]:
        """rel -> verdict dict; one progress line per target as its verdict arrives."""
        ids = {self.client.submit(t.full, code_dir=code_dir, known_sha256=t.known_sha256): t
               for t in targets}
        out: dict[str, dict] = {}
        for verdict in self._collect(ids):
            target = ids[verdict.id]
            out[target.rel] = verdict.to_dict()
            if progress:
                progress(f"reloaded {len(out)}/{len(targets)}: {target.rel} "
                         f"{_describe(verdict)}")
        return out

    def _collect(self, ids: dict):
        return list(self.client.wait_for(ids).values())

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "Reloader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _describe(verdict) -> str:
    if verdict.non_finite:
        return f"NON-FINITE ({verdict.problem})"
    if not verdict.ok:
        return f"FAILED ({verdict.problem})"
    what = verdict.summary or verdict.kind or "ok"
    return f"ok ({verdict.format}: {what})"
