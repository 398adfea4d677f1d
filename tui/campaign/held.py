"""Holding an acknowledged checkpoint with hard links until it is verified.

A trainer may delete its own checkpoints soon after writing them: HF's
`save_total_limit` removes `checkpoint-N/` at the next save, often before the
engine's fresh verifier has reached it (seconds later), and a verdict of "no
such file" then read as a FAILED checkpoint that was fine. So whoever
acknowledges a checkpoint (the SDK on the training side, the watcher of
user-written checkpoints in the engine) first links its files into
`<run dir>/.itera-held/<tag>/<name>`: the same inodes, no bytes copied, and a
deletion by the trainer no longer frees them. The verifier reads the held
copy; the engine releases it as soon as the verdict is in. Where links
cannot be made (another filesystem, a filesystem without them) nothing is
held and the checkpoint is verified where it lies, as before.

The folder starts with a dot, so watch globs and the bundle never take it for
a checkpoint. Stdlib only: the training side and the engine share it.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path, PurePosixPath

from .files import NotATree, tree_files

HELD_DIR = ".itera-held"


def hold(run_dir: Path, relative: str, tag: str) -> str | None:
    """Hard-link the checkpoint at `run_dir/relative` (a file or a directory) into
    `run_dir/.itera-held/<tag>/`; return the held copy's path relative to `run_dir`,
    or None when it cannot be held (nothing is left half-made). Never raises."""
    run_dir = Path(run_dir)
    name = PurePosixPath(relative).name or "checkpoint"
    if not tag or "/" in tag or tag.startswith("."):
        return None
    held_rel = f"{HELD_DIR}/{tag}/{name}"
    source, target = run_dir / relative, run_dir / held_rel
    if (run_dir / HELD_DIR).is_symlink() or (target.parent.is_symlink()):
        return None  # planted by the run: never link (or remove) through it
    try:
        if target.parent.exists():
            shutil.rmtree(target.parent)  # a hold left by a run that died: made again
        if source.is_dir():
            for rel, path in tree_files(source):
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                os.link(path, target / rel)
            target.mkdir(parents=True, exist_ok=True)
        elif source.is_file() and not source.is_symlink():
            target.parent.mkdir(parents=True, exist_ok=True)
            os.link(source, target)
        else:
            return None
    except (OSError, NotATree):
        release(run_dir, held_rel)
        return None
    return held_rel


def held_path(run_dir: Path, held_rel: str | None) -> Path | None:
    """The held copy `held_rel` names, when it is of the form `.itera-held/<tag>/<name>`
    inside `run_dir` and exists; None otherwise (a run's ack is text it controls)."""
    if not isinstance(held_rel, str):
        return None
    parts = PurePosixPath(held_rel).parts
    if len(parts) != 3 or parts[0] != HELD_DIR or ".." in parts or any(
            p.startswith(".") for p in parts[1:]):
        return None
    path = Path(run_dir) / held_rel
    return path if path.exists() and not (Path(run_dir) / HELD_DIR).is_symlink() else None


def release(run_dir: Path, held_rel: str | None) -> None:
    """Remove a held copy (its links only; the trainer's files are not touched).
    Only a path of the form `.itera-held/<tag>/<name>` inside `run_dir` is removed."""
    if held_path(run_dir, held_rel) is None:
        return
    folder = Path(run_dir) / HELD_DIR / PurePosixPath(held_rel).parts[1]
    try:
        if folder.is_symlink():
            return
        shutil.rmtree(folder)
    except OSError:
        pass
    try:
        (Path(run_dir) / HELD_DIR).rmdir()  # only when nothing else is held
    except OSError:
        pass
