"""Hashing files, once for the whole core: corpus pins, bundle manifests and
checkpoint directories (an HF `checkpoint-N/`), which the SDK, the watcher of
user-written checkpoints and the bundle must all hash the same way."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

CHUNK = 1 << 20


def sha256_file(path: Path) -> tuple[str, int]:
    """(hex sha256, size in bytes) of a file, read in chunks."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


class NotATree(ValueError):
    """A checkpoint directory holds something other than regular files and folders."""


def tree_files(root: Path) -> list[tuple[str, Path]]:
    """(relative POSIX name, path) of every regular file under `root`, sorted by name.

    A symbolic link or a special file (fifo, socket, device) anywhere inside
    raises NotATree: a checkpoint must be self-contained, and its hash must
    cover exactly the bytes a loader will read."""
    root = Path(root)
    out: list[tuple[str, Path]] = []
    pending = [root]
    while pending:
        folder = pending.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                path = Path(entry.path)
                if entry.is_symlink():
                    raise NotATree(f"{path.relative_to(root).as_posix()}: a symbolic link")
                if entry.is_dir(follow_symlinks=False):
                    pending.append(path)
                elif entry.is_file(follow_symlinks=False):
                    out.append((path.relative_to(root).as_posix(), path))
                else:
                    raise NotATree(f"{path.relative_to(root).as_posix()}: not a regular file")
    out.sort()
    return out


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO"), from its st_mode."""
    import stat

    return ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a special file")


def tree_digest(listing: list[tuple[str, str]]) -> str:
    """The sha256 of a directory from its (relative POSIX name, file sha256) pairs.

    Defined as the sha256 of the text `sha256sum` prints for the sorted files,
    one ``"<file sha256>  <relative/name>\\n"`` line each, so anyone can check it:
    ``cd DIR && find . -type f -printf '%P\\0' | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum``
    (UTF-8 byte order and code-point order sort alike)."""
    digest = hashlib.sha256()
    for name, file_digest in sorted(listing):
        digest.update(f"{file_digest}  {name}\n".encode())
    return digest.hexdigest()


def sha256_tree(root: Path) -> tuple[str, int]:
    """(tree sha256 as tree_digest defines it, total bytes) of a directory."""
    listing, total = [], 0
    for name, path in tree_files(root):
        digest, size = sha256_file(path)
        listing.append((name, digest))
        total += size
    return tree_digest(listing), total


def sha256_path(path: Path) -> tuple[str, int]:
    """sha256_file for a file, sha256_tree for a directory."""
    return sha256_tree(path) if Path(path).is_dir() else sha256_file(path)


# The places itera-tui writes, relative to the campaign folder, and what each holds.
WRITTEN_PLACES = ((".itera", "the campaign's state (ledger, frozen plan, runs)"),
                  (".itera/ledger.jsonl", "the ledger"),
                  (".itera/plan.toml", "the frozen plan"),
                  (".itera/runs", "the run directories"))


def link_out_of(root: Path, rel: str) -> tuple[str, Path] | None:
    """(the component, where it points) of the first symbolic link on the way from
    `root` to `root/rel` that leads outside `root`; None when every step stays in.

    Like Git refusing a `.git` it did not create: a cloned campaign folder may ship
    `outputs -> /somewhere`, and the whole bundle would be written there, silently."""
    home = Path(os.path.realpath(root))
    here = Path(root)
    for part in Path(rel).parts:
        here = here / part
        if not here.is_symlink():
            continue
        target = Path(os.path.realpath(here))
        if target != home and home not in target.parents:
            return here.relative_to(root).as_posix(), target
    return None


def links_out_of_campaign(root: Path, outputs: str) -> list[str]:
    """One problem line per place itera-tui writes that is a symbolic link out of the
    campaign folder: the outputs (and its bundle), `.itera/`, its ledger, frozen plan,
    runs folder and each run directory."""
    places = [(outputs, "the outputs (the bundle is written there)"),
              (f"{outputs}/bundle", "the bundle"), *WRITTEN_PLACES]
    runs = Path(root) / ".itera" / "runs"
    try:
        if runs.is_dir() and not runs.is_symlink():
            with os.scandir(runs) as entries:
                places += [(f".itera/runs/{e.name}", "a run directory")
                           for e in entries if e.is_symlink()]
    except OSError:
        pass
    problems, seen = [], set()
    for rel, what in places:
        found = link_out_of(Path(root), rel)
        if found is None or found[0] in seen:
            continue
        seen.add(found[0])
        link, target = found
        key = "campaign.outputs" if rel.startswith(outputs) and not rel.startswith(".itera") \
            else link
        problems.append(f"{key}: \"{link}\" is a symbolic link out of the campaign folder "
                        f"(to {target}); {what} would be written there: make it a real "
                        "folder inside the campaign folder")
    return problems
