"""A checkpoint folder in the store (an HF `checkpoint-N/`): its files, then its manifest.

HF's callback and `[checkpoint] watch = ["out/checkpoint-*"]` acknowledge folders,
not files; the mirror that stored regular files only left every one of them on
the box. A folder is stored file by file, each streamed and hashed on the way
and its size checked at the store (the same memory and bandwidth as a single
file: one `transfer.CHUNK` at a time, each byte sent once), and only then its
manifest, `<folder>.itera-folder.json`: every file's name, size and sha256, and
the folder's tree sha256 (`tui.campaign.files.tree_digest`, the digest its run
acknowledged). The manifest is written LAST and the part's `index.json` after it,
so a box that dies half-way leaves files no index names and no manifest: a
half-stored folder is never taken for a whole one. Reading one back checks the
manifest against the index's tree sha256, each name as hostile input, and each
file by size and sha256, into `<dest>.part/`, renamed to `<dest>` only when whole.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ..campaign.files import NotATree, tree_digest, tree_files
from .layout import safe_key
from .transfer import LocalGone, download_file, remote_size, upload_bytes, upload_file

MANIFEST_SUFFIX = ".itera-folder.json"
FORMAT = "itera-folder/1"
MAX_MANIFEST_BYTES = 8 << 20


@dataclass(frozen=True)
class FolderMoved:
    """One folder stored: its total bytes, tree sha256 and number of files."""

    bytes: int
    sha256: str
    files: int


def manifest_key(remote: str) -> str:
    """Where a folder's manifest is: beside it, so the folder holds the checkpoint's
    files and nothing else."""
    return remote.rstrip("/") + MANIFEST_SUFFIX


def upload_folder(fs, local: Path, remote: str) -> FolderMoved:
    """Store the folder `local` at `remote/`: each file (size checked at the store),
    then the manifest. LocalGone when the folder, or a file of it, is gone or is not a
    plain tree (a link, a FIFO inside): not the store's failure."""
    try:
        files = tree_files(local)
    except (OSError, NotATree) as exc:
        raise LocalGone(f"{local.name}: {exc}") from None
    if not files:
        raise LocalGone(f"{local.name}: an empty folder")
    listing = []
    for name, path in files:
        key = f"{remote}/{name}"
        moved = upload_file(fs, path, key)
        size = remote_size(fs, key)
        if size != moved.bytes:
            raise OSError(f"{key}: {size} bytes in the store after sending {moved.bytes}")
        listing.append({"name": name, "bytes": moved.bytes, "sha256": moved.sha256})
    digest = tree_digest([(f["name"], f["sha256"]) for f in listing])
    total = sum(f["bytes"] for f in listing)
    manifest = {"format": FORMAT, "sha256": digest, "bytes": total, "files": listing}
    upload_bytes(fs, (json.dumps(manifest, indent=1) + "\n").encode(), manifest_key(remote))
    return FolderMoved(total, digest, len(listing))


def read_manifest(fs, remote: str, sha256: str, size: int) -> list[tuple[str, int, str]]:
    """The folder's (name, bytes, sha256) list, checked: a manifest that is there, whose
    files add up to the tree sha256 and size the index recorded, and whose every name
    stays inside the folder. ValueError names what is wrong."""
    try:
        raw = fs.cat_file(manifest_key(remote), start=0, end=MAX_MANIFEST_BYTES + 1)
    except FileNotFoundError:
        raise ValueError("its folder's manifest is not in the store (a half-stored "
                         "folder)") from None
    if len(raw) > MAX_MANIFEST_BYTES:
        raise ValueError("its folder's manifest is too large")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise ValueError("its folder's manifest is not JSON") from None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or data.get("format") != FORMAT:
        raise ValueError(f"its folder's manifest is not an {FORMAT} manifest")
    out = []
    for f in files:
        ok = isinstance(f, dict) and isinstance(f.get("name"), str) and isinstance(
            f.get("bytes"), int) and isinstance(f.get("sha256"), str)
        if not ok or safe_key(f["name"]) != f["name"]:
            raise ValueError("its folder's manifest names a file outside the folder "
                             "or is malformed")
        out.append((f["name"], f["bytes"], f["sha256"]))
    if tree_digest([(n, s) for n, _, s in out]) != sha256 or sum(b for _, b, _ in out) != size:
        raise ValueError("its folder's manifest differs from the index (tree sha256 "
                         "or size)")
    return out


def download_folder(fs, remote: str, dest: Path, *, sha256: str, size: int) -> int:
    """Lay the stored folder at `dest`, every file checked; the number of files. Nothing
    takes the name `dest` unless every file matched (ValueError / OSError otherwise)."""
    listing = read_manifest(fs, remote, sha256, size)
    dest = Path(dest)
    tmp = dest.with_name(dest.name + ".part")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        for name, n, sha in listing:
            download_file(fs, f"{remote}/{name}", tmp / name, sha256=sha, size=n)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return len(listing)
