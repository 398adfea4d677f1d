"""The bundle delivered to the store, then verified *there*; and any stored bundle
verified (or fetched) from any machine.

Delivery uploads every file of the verified bundle (the filesystem's own streamed,
concurrent put), `manifest.json` last: a reader that finds the manifest finds every file it lists.
Then each listed file is read back from the store in chunks and hashed against the
manifest (bounded memory, whatever its size): the bundle counts as delivered only
when every file the manifest names is in the store with its size and sha256. The
same check is `itera-tui verify URL` from any machine, and `itera-tui fetch URL DIR`
is that check writing each file as it reads it (kept only when it matches).

A delivery waits for nothing and is bounded: each request to the store has its
deadline (transfer.BoundedFS), and the whole delivery its bound (`delivery_bound_s`:
four times the time the measured rate predicts, at least DELIVERY_MIN_S, or
DELIVERY_MAX_S when nothing measured the store). One that cannot finish within it
ends with StoreNotAnswering ("bundle not delivered: the store did not
answer: …"), which the wrap-up says and reports as a failed delivery, never a hung wrap-up.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Callable

from .transfer import (StoreNotAnswering, bounded, download_file, hash_remote, listed_sizes,
                       remote_size, upload_file)
from .url import Store, StoreError, open_store

MANIFEST = "manifest.json"
FAILURES_KEPT = 50
PARALLEL = 4  # files moved at once (as fsspec's own put/get do); memory: 4 chunks
DELIVERY_MIN_S = 600.0  # a delivery's bound: never less than this...
DELIVERY_FACTOR = 4.0  # ... else this many times what the measured rate predicts...
DELIVERY_MAX_S = 3600.0  # ... or this when the store's rate was never measured


def delivery_bound_s(estimate_s: float | None) -> float:
    """How long a delivery may take before it is given up (see the module's words)."""
    if estimate_s is None:
        return DELIVERY_MAX_S
    return max(DELIVERY_MIN_S, DELIVERY_FACTOR * estimate_s)


@dataclass(frozen=True)
class StoredBundleCheck:
    """A bundle checked at the store: each listed file read back and hashed."""

    url: str
    verified: bool
    files: int  # listed in the manifest (the manifest itself included)
    bytes: int
    failures: tuple[str, ...]  # "path: problem", each naming the file
    seconds: float
    upload_s: float | None = None  # of `seconds`, the upload (the rest: reading it back)


def _walk(bundle: Path) -> list[Path]:
    out = []
    for dirpath, dirnames, filenames in os.walk(bundle):
        dirnames.sort()
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if path.is_file() and not path.is_symlink():
                out.append(path)
    return out


def deliver_bundle(store: Store, key: str, bundle: Path,
                   say: Callable[[str], None] = lambda line: None,
                   fence: Callable[[], None] = lambda: None,
                   within_s: float | None = None) -> StoredBundleCheck:
    """Upload `bundle` under `key` (manifest last), then verify it at the store.
    `fence` (the lease's `ensure`) raises before each write once another box holds
    the campaign: a superseded engine delivers nothing. With `within_s`, given up
    after that long (StoreNotAnswering: "bundle not delivered…")."""
    try:
        if within_s is None:
            return _deliver(store, key, bundle, say, fence)
        return bounded(lambda w: _deliver(store, key, bundle, say, fence, w), "the delivery",
                       within_s, f"the store did not answer: the delivery did not end within "
                       f"{within_s:.0f} s")
    except StoreNotAnswering as exc:
        raise StoreNotAnswering(f"bundle not delivered: {exc}") from None


def _deliver(store: Store, key: str, bundle: Path, say: Callable[[str], None],
             fence: Callable[[], None] = lambda: None, watch=None) -> StoredBundleCheck:
    bundle = Path(bundle)
    t0 = time.monotonic()
    files = _walk(bundle)
    manifest = bundle / MANIFEST
    if manifest not in files:
        raise StoreError(f"{bundle.name}: no manifest.json: not a bundle to deliver")
    files = [f for f in files if f != manifest] + [manifest]
    fs = store.fs
    total = sum(f.stat().st_size for f in files)
    say(f"delivering the bundle to {store.url.url_of(key)} ({len(files)} files, "
        f"{total / 1e6:.1f} MB)…")
    # every file with the filesystem's own put (concurrent, as fast as a bare copy: no hash
    # is needed on the way, the read-back below checks each file against the manifest);
    # the manifest goes last, alone, once every file it lists is there
    body = files[:-1]
    fence()
    if body:
        fs.put([str(p) for p in body],
               [store.path(key, p.relative_to(bundle).as_posix()) for p in body])
    fence()
    if watch is not None and watch.abandoned:  # given up: never delivered after its verdict
        raise StoreNotAnswering("the delivery was given up before its manifest")
    upload_file(fs, manifest, store.path(key, MANIFEST))
    upload_s = time.monotonic() - t0
    say("reading it back from the store to verify it there…")
    check = verify_at(store, key)
    return StoredBundleCheck(check.url, check.verified, check.files, check.bytes,
                             check.failures, round(time.monotonic() - t0, 3),
                             round(upload_s, 3))


def _read_manifest(store: Store, key: str) -> tuple[dict | None, list[str]]:
    from ..bundle.manifest_check import MAX_BYTES, read_manifest

    with tempfile.TemporaryDirectory(prefix="itera-manifest-") as tmp:
        try:  # one ranged read: no size asked first, never more than a manifest may hold
            data = store.fs.cat_file(store.path(key, MANIFEST), start=0, end=MAX_BYTES + 1)
        except FileNotFoundError:
            return None, [f"{MANIFEST}: not in the store (not delivered, or delivery cut "
                          "short before its end)"]
        Path(tmp, MANIFEST).write_bytes(data)
        manifest, problems = read_manifest(Path(tmp))
    return manifest, [f"{MANIFEST}: {p}" for p in problems]


def verify_at(store: Store, key: str, dest: Path | None = None,
              progress: Callable[[str], None] = lambda line: None) -> StoredBundleCheck:
    """Every file the stored manifest lists, read back and hashed (into `dest` too
    when given: each file kept there only when it matches)."""
    t0 = time.monotonic()
    url = store.url.url_of(key)
    fs = store.fs
    with ThreadPoolExecutor(1, thread_name_prefix="itera-verify") as pool:
        # one listing (each file's size: an open asked the store for it, a request a file)
        # while the manifest is read
        listing = pool.submit(listed_sizes, fs, store.path(key))
        manifest, failures = _read_manifest(store, key)
        sizes = listing.result()
    if manifest is None:
        return StoredBundleCheck(url, False, 0, 0, tuple(failures), 0.0)
    entries = [e for e in manifest.get("files") or [] if isinstance(e, dict)
               and isinstance(e.get("path"), str)]
    unsafe = _names_leaving(entries)
    if unsafe:  # a hostile manifest: refused whole before anything is read or written
        return StoredBundleCheck(url, False, 0, 0, tuple(failures + unsafe)[:FAILURES_KEPT],
                                 round(time.monotonic() - t0, 3))
    done_bytes = 0

    def read_back(entry):
        rel = entry["path"]
        remote = store.path(key, rel)
        listed = sizes.get(remote)  # not listed: the open asks (and finds it missing)
        try:
            if dest is not None:
                return entry, download_file(fs, remote, Path(dest) / rel,
                                            sha256=entry.get("sha256"), size=entry.get("bytes"),
                                            listed=listed)
            return entry, hash_remote(fs, remote, listed)
        except FileNotFoundError:
            return entry, "missing at the store"
        except ValueError as exc:
            return entry, str(exc).split(": ", 1)[-1]

    with ThreadPoolExecutor(PARALLEL, thread_name_prefix="itera-verify") as pool:
        answers = list(pool.map(read_back, entries))  # PARALLEL reads, CHUNK each: bounded
    for entry, got in answers:
        rel = entry["path"]
        if isinstance(got, str):
            failures.append(f"{rel}: {got}")
            continue
        if got.bytes != entry.get("bytes"):
            failures.append(f"{rel}: {got.bytes} bytes at the store, the manifest says "
                            f"{entry.get('bytes')}")
        elif got.sha256 != entry.get("sha256"):
            failures.append(f"{rel}: sha256 at the store differs from the manifest's "
                            "(altered or damaged)")
        done_bytes += got.bytes
        progress(rel)
    if dest is not None and not failures:
        download_file(fs, store.path(key, MANIFEST), Path(dest) / MANIFEST)
    return StoredBundleCheck(url, not failures, len(entries) + 1, done_bytes,
                             tuple(failures[:FAILURES_KEPT]), round(time.monotonic() - t0, 3))


def delivered_at(store: Store, key: str, recorded: dict | None) -> StoredBundleCheck:
    """Whether a part's bundle stands delivered at the store (what `resume` asks of a
    campaign wrapped up on a box now gone). The index recorded it verified there
    (`recorded`, its `bundle` entry): every file the manifest lists is still there at
    its size, a listing only. Recorded otherwise or not at all (a box lost mid-delivery
    wrote its manifest but not the index): read back and hashed whole (verify_at)."""
    if not (isinstance(recorded, dict) and recorded.get("verified") is True):
        return verify_at(store, key)
    t0 = time.monotonic()
    manifest, failures = _read_manifest(store, key)
    if manifest is None:
        return StoredBundleCheck(store.url.url_of(key), False, 0, 0, tuple(failures), 0.0)
    entries = [e for e in manifest.get("files") or [] if isinstance(e, dict)
               and isinstance(e.get("path"), str)]
    failures += _names_leaving(entries)
    total = 0
    sizes = listed_sizes(store.fs, store.path(key)) if not failures else {}  # one request
    for entry in entries if not failures else ():
        remote = store.path(key, entry["path"])
        size = sizes[remote] if remote in sizes else remote_size(store.fs, remote)
        if size != entry.get("bytes"):
            failures.append(f"{entry['path']}: " + ("missing at the store" if size is None
                            else f"{size} bytes at the store, the manifest says "
                            f"{entry.get('bytes')}"))
        total += size or 0
    return StoredBundleCheck(store.url.url_of(key), not failures, len(entries) + 1, total,
                             tuple(failures[:FAILURES_KEPT]), round(time.monotonic() - t0, 3))


def _names_leaving(entries: list[dict]) -> list[str]:
    """The manifest's names that would leave the bundle's folder (absolute, `..`, a
    backslash, the manifest's own name, empty), each in words safe to print. Checked
    for every name before the first file is read: whoever can write to the store must
    not be able to write a file anywhere else the fetching user can."""
    from ..bundle.stage import safe_relative
    from ..campaign.text import for_terminal

    bad = []
    for entry in entries:
        rel = entry["path"]
        if not safe_relative(rel) or "\x00" in rel or \
                PurePosixPath(rel).as_posix() in (".", MANIFEST):
            bad.append(f"{for_terminal(repr(rel))[:200]}: a name that leaves the bundle's "
                       "folder: nothing was read or written")
    return bad


def split_bundle_url(url: str) -> tuple[str, str]:
    """A bundle URL as (store root, key): `s3://b/p/lot1/bundle` -> (`s3://b/p/lot1/bundle`,
    ``); the check reads `<url>/manifest.json`."""
    return url.rstrip("/"), ""


def verify_stored_bundle(url: str, options: dict | None = None,
                         dest: Path | None = None) -> StoredBundleCheck:
    """`itera-tui verify URL` (and `fetch URL DIR`): the bundle at `url` checked there."""
    root, key = split_bundle_url(url)
    store = open_store(root, options)
    fs = store.fs
    if not fs.exists(store.path(key, MANIFEST)) and fs.exists(store.path(key, "bundle",
                                                                        MANIFEST)):
        key = "bundle"  # the part's URL was given: its bundle is meant
    if not fs.exists(store.path(key)):  # no bucket, prefix or folder there: said as such
        raise FileNotFoundError(f"{store.path(key)}: no such bucket, prefix or folder")
    return verify_at(store, key, dest)


def options_from_env(environ=None) -> dict:
    """Filesystem options for `verify`/`fetch` on another machine: an S3 endpoint from
    ITERA_STORE_ENDPOINT (or AWS_ENDPOINT_URL, which botocore also reads)."""
    env = os.environ if environ is None else environ
    endpoint = env.get("ITERA_STORE_ENDPOINT")
    return {"endpoint_url": endpoint} if endpoint else {}


def check_json(check: StoredBundleCheck) -> str:
    return json.dumps({"url": check.url, "verified": check.verified, "files": check.files,
                       "bytes": check.bytes, "failures": list(check.failures),
                       "seconds": check.seconds}, indent=2)
