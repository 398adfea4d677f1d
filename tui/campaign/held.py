"""Holding an acknowledged checkpoint (hard links, or a copy) until it is verified.

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

A link shares the file's inode, so it only holds bytes that are never written
again in place: the SDK's atomic saves and HF's new `checkpoint-N/` folders.
A file user code rewrites in place (nanoGPT's `out/ckpt.pt`, saved at every
eval) would change under its link after it was acknowledged, so the watcher
holds a watched file by a copy instead (`copy_held`): a reflink where the
filesystem has them (`ioctl FICLONE`: no bytes copied, and the clone no longer
changes with the original), otherwise a copy, hashed as it is written, so the
digest acknowledged is that of the bytes held, verified, stored and bundled.

The folder starts with a dot, so watch globs and the bundle never take it for
a checkpoint. Stdlib only: the training side and the engine share it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .files import CHUNK, NotATree, sha256_file, tree_files

HELD_DIR = ".itera-held"
FICLONE = 0x40049409  # linux/fs.h: _IOW(0x94, 9, int); fcntl.FICLONE only from Python 3.12


@dataclass(frozen=True)
class HeldCopy:
    """A file's own copy in the held folder, and the digest of the bytes it holds."""
    path: str  # relative to the run directory: `.itera-held/<tag>/<name>`
    sha256: str
    bytes: int
    reflinked: bool  # cloned by the filesystem (no bytes copied), not copied


def _target(run_dir: Path, relative: str, tag: str) -> str | None:
    """`.itera-held/<tag>/<name>` for a valid tag, made empty; None when it cannot be."""
    name = PurePosixPath(relative).name or "checkpoint"
    if not tag or "/" in tag or tag.startswith("."):
        return None
    held_rel = f"{HELD_DIR}/{tag}/{name}"
    target = run_dir / held_rel
    if (run_dir / HELD_DIR).is_symlink() or target.parent.is_symlink():
        return None  # planted by the run: never write (or remove) through it
    if target.parent.exists():
        shutil.rmtree(target.parent)  # a hold left by a run that died: made again
    return held_rel


def _reflink(src_fd: int, dst_fd: int) -> bool:
    """Clone src into dst where the filesystem can (btrfs, XFS, ...); False otherwise."""
    if not sys.platform.startswith("linux"):
        return False
    import fcntl

    try:
        fcntl.ioctl(dst_fd, FICLONE, src_fd)
    except OSError:  # EOPNOTSUPP, EXDEV, EINVAL, ENOTTY: copied instead
        return False
    return True


def copy_held(run_dir: Path, relative: str, tag: str) -> HeldCopy | None:
    """Copy the regular file `run_dir/relative` into `run_dir/.itera-held/<tag>/`
    (a reflink where the filesystem has them) and hash the copy; None when the tag
    or the held folder is not usable. Raises OSError (nothing left half-made) when
    the file cannot be read or the copy written (a full disk): the caller decides."""
    run_dir = Path(run_dir)
    held_rel = _target(run_dir, relative, tag)
    if held_rel is None:
        return None
    target = run_dir / held_rel
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        src = os.open(run_dir / relative, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        try:
            dst = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                reflinked = _reflink(src, dst)
                if not reflinked:
                    digest, size = hashlib.sha256(), 0
                    while block := os.read(src, CHUNK):
                        digest.update(block)
                        size += len(block)
                        view = memoryview(block)
                        while view:
                            view = view[os.write(dst, view):]
            finally:
                os.close(dst)
        finally:
            os.close(src)
        if reflinked:  # the clone is the file as it was at the ioctl: hash what is held
            sha256, size = sha256_file(target)
        else:
            sha256 = digest.hexdigest()
    except BaseException:
        _remove(run_dir, PurePosixPath(held_rel).parts[1])
        raise
    return HeldCopy(held_rel, sha256, size, reflinked)


def hold(run_dir: Path, relative: str, tag: str) -> str | None:
    """Hard-link the checkpoint at `run_dir/relative` (a file or a directory) into
    `run_dir/.itera-held/<tag>/`; return the held copy's path relative to `run_dir`,
    or None when it cannot be held (nothing is left half-made). Never raises."""
    run_dir = Path(run_dir)
    source = run_dir / relative
    held_rel = None
    try:
        held_rel = _target(run_dir, relative, tag)
        if held_rel is None:
            return None
        target = run_dir / held_rel
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
        if held_rel is not None:
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
    """Remove a held copy (its links or its copy; the trainer's files are not touched).
    Only a path of the form `.itera-held/<tag>/<name>` inside `run_dir` is removed."""
    if held_path(run_dir, held_rel) is None:
        return
    _remove(run_dir, PurePosixPath(held_rel).parts[1])


def sweep(run_dir: Path, prefix: str, keep) -> None:
    """Remove the held folders whose tag starts with `prefix` but is not in `keep`: copies
    an engine made and never recorded (it stopped between the copy and the ledger)."""
    folder = Path(run_dir) / HELD_DIR
    if folder.is_symlink() or not folder.is_dir():
        return
    for entry in list(folder.iterdir()):
        if entry.name.startswith(prefix) and entry.name not in keep:
            _remove(run_dir, entry.name)


def tag_of(held_rel: str | None) -> str | None:
    """The tag of a held copy's path (`.itera-held/<tag>/<name>`), else None."""
    parts = PurePosixPath(held_rel).parts if isinstance(held_rel, str) else ()
    return parts[1] if len(parts) == 3 and parts[0] == HELD_DIR else None


def _remove(run_dir: Path, tag: str) -> None:
    """Remove the held folder `tag` (never through a link), then the held folder itself
    when nothing else is held."""
    folder = Path(run_dir) / HELD_DIR / tag
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
