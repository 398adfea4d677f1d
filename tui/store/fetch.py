"""Reading a campaign back out of a store, from any machine (no engine needed).

What `itera-tui verify URL` and `itera-tui resume URL` build on: the parts a store
holds, a part's index, its ledger re-assembled from its byte ranges and checked
against the index (length and sha256), and each stored object copied to a local
file only when its length and hash are those the index recorded.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from .folders import download_folder
from .index import MAX_INDEX_BYTES, StoreIndex
from .layout import ObjectKind, Layout, parse_segment
from .transfer import download_file
from .url import Store, StoreError, StoreUrl


def list_parts(store: Store) -> list[str]:
    """The parts (lot ids) that hold an index.json, sorted."""
    fs = store.fs
    out = []
    try:
        entries = fs.ls(store.path(), detail=False)
    except FileNotFoundError:
        return []
    for entry in entries:
        name = str(entry).rstrip("/").rsplit("/", 1)[-1]
        if fs.exists(store.path(name, "index.json")):
            out.append(name)
    return sorted(out)


def part_named_by(store: Store) -> tuple[Store, str] | None:
    """A URL that names one part itself (`s3://bucket/prefix/lot1`, as docs/away.md
    prints it: the store's root and a lot's part): the store at its parent and the
    part; None when the URL holds no index.json of its own (a store's root)."""
    head, _, name = store.url.root.rpartition("/")
    if not head or not name or not store.fs.exists(store.path("index.json")):
        return None
    text = store.url.text.rpartition("/")[0]
    return Store(StoreUrl(text, store.url.protocol, head), store.options), name


def read_index(store: Store, part: str) -> StoreIndex | None:
    """The part's index, None when there is none; StoreError when it cannot be trusted."""
    fs = store.fs
    key = store.path(Layout(part).index)
    try:  # one GET, no version pinned: the mirror replaces the index while it is read
        data = fs.cat_file(key, start=0, end=MAX_INDEX_BYTES + 1)
    except FileNotFoundError:
        return None
    if len(data) > MAX_INDEX_BYTES:
        raise StoreError(f"{store.url.url_of(Layout(part).index)}: too large for an index")
    try:
        return StoreIndex.from_json(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise StoreError(f"{store.url.url_of(Layout(part).index)}: {exc}") from None


def ledger_segments(store: Store, part: str) -> list[tuple[int, int, str]]:
    """(start, end, path) of every ledger byte range stored, in order."""
    fs = store.fs
    try:
        names = fs.ls(store.path(Layout(part).ledger_dir), detail=False)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        span = parse_segment(str(name))
        if span is not None:
            out.append((span[0], span[1], str(name)))
    return sorted(out)


def read_ledger(store: Store, part: str, index: StoreIndex | None = None) -> bytes:
    """The ledger as stored: its ranges joined from byte 0, up to what the index says is
    stored, checked by length and sha256 (StoreError names a gap or a difference)."""
    index = index if index is not None else read_index(store, part)
    want = index.ledger_bytes if index is not None else None
    fs = store.fs
    chunks, at = [], 0
    for start, end, path in ledger_segments(store, part):
        if end <= at:
            continue  # covered by a longer range (a push retried after a timeout)
        if start > at:
            raise StoreError(f"ledger in the store has a gap at byte {at} (next range "
                             f"starts at {start})")
        data = fs.cat_file(path)
        if len(data) != end - start:
            raise StoreError(f"ledger range {start}-{end}: {len(data)} bytes stored")
        chunks.append(data[at - start:])
        at = end
        if want is not None and at >= want:
            break
    data = b"".join(chunks)
    if want is not None:
        if len(data) < want:
            raise StoreError(f"ledger in the store: {len(data)} bytes, the index says {want}")
        data = data[:want]
        if index.ledger_sha256 and hashlib.sha256(data).hexdigest() != index.ledger_sha256:
            raise StoreError("ledger in the store: sha256 differs from the index's")
    return data


@dataclass(frozen=True)
class Fetched:
    """What `fetch_part` laid down locally, and what it could not."""

    files: tuple[str, ...]
    problems: tuple[str, ...]
    index: StoreIndex | None = None  # the index they were fetched by (what it lists)


def fetch_part(store: Store, part: str, dest: Path, kinds=(ObjectKind.PLAN,
               ObjectKind.CHECKPOINT)) -> Fetched:
    """A part laid into a campaign folder `dest` as the engine would have it:
    `.itera/ledger.jsonl`, `.itera/plan.toml`, `.itera/runs/<run>/<path>` for each
    checkpoint (a folder laid back whole, by its manifest, or not at all), and logs
    and an exited run's results with ObjectKind.LOG and ObjectKind.RESULT; each copy
    checked by size and hash."""
    dest = Path(dest)
    index = read_index(store, part)
    if index is None:
        raise StoreError(f"{store.url.url_of(part)}: no index.json: nothing stored there")
    state = dest / ".itera"
    state.mkdir(parents=True, exist_ok=True)
    files, problems = [], []
    ledger = read_ledger(store, part, index)
    (state / "ledger.jsonl").write_bytes(ledger)
    files.append(".itera/ledger.jsonl")
    for obj in index.objects:
        if obj.kind not in kinds:
            continue
        local = _local_path(state, obj)
        if local is None:
            problems.append(f"{obj.key}: not a path inside the campaign folder")
            continue
        try:
            if obj.files is not None:  # a checkpoint folder: whole, by its manifest
                download_folder(store.fs, store.path(obj.key), local, sha256=obj.sha256,
                                size=obj.bytes)
            else:
                download_file(store.fs, store.path(obj.key), local, sha256=obj.sha256,
                              size=obj.bytes)
            files.append(str(local.relative_to(dest)))
        except (OSError, ValueError) as exc:
            problems.append(f"{obj.key}: {exc}")
    return Fetched(tuple(files), tuple(problems), index)


def _local_path(state: Path, obj) -> Path | None:
    from .layout import safe_key

    if obj.kind == ObjectKind.PLAN:
        return state / "plan.toml"
    rel = safe_key(obj.source or "")
    if rel is None:
        return None
    return state.parent / rel
