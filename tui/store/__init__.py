"""The off-box store: the campaign kept somewhere the box's end cannot take.

A rented box is a disk that disappears. With `[store] url` (any fsspec URL:
s3://bucket/prefix, sftp://user@host/path, file:///mnt/volume/x) the session
mirrors the frozen plan, the ledger, every verified checkpoint and the runs' logs
there as they happen, in a background thread (`mirror.Mirror`), and the wrap-up
delivers the bundle and verifies it *at the store* (`deliver`). Peer of
tui.notify and tui.remote: may import bundle, engine and campaign; the session
wires it; never imported by the engine loop.

API (what `itera-tui verify URL` and `itera-tui resume URL` build on):

    store = open_store("s3://bucket/prefix", {"endpoint_url": ...})  # or a StorePlan
    store.fs, store.path(key), store.label, store.url.url_of(key)
    Layout(part): index, plan, ledger_segment(a, b), checkpoint(run, path), log, bundle
    part_of(plan, share)                 -> this box's part (its first lot id)
    list_parts(store)                    -> ["lot1", ...]
    read_index(store, part)              -> StoreIndex | None (objects stored whole)
    read_ledger(store, part)             -> bytes, checked against the index
    fetch_part(store, part, dest)        -> Fetched: .itera/ledger.jsonl, plan.toml,
                                            checkpoints under .itera/runs/<run>/
    download_file(fs, remote, dest, sha256=, size=)  streamed, kept only if it matches
    split_bundle_url(url) / verify_stored_bundle(url) (deliver.py)

Credentials never come from campaign.toml: the loader refuses secret-looking options
and the libraries read the environment, ~/.aws profiles and ~/.ssh.
"""

from .fetch import Fetched, fetch_part, ledger_segments, list_parts, read_index, read_ledger
from .index import StoredObject, StoreIndex
from .layout import Layout, ObjectKind, part_of
from .transfer import Moved, download_file, hash_remote, upload_bytes, upload_file
from .url import Store, StoreError, StoreUrl, open_store

__all__ = ["Fetched", "Layout", "Moved", "ObjectKind", "Store", "StoreError", "StoreIndex",
           "StoreUrl", "StoredObject", "download_file", "fetch_part", "hash_remote",
           "ledger_segments", "list_parts", "open_store", "part_of", "read_index",
           "read_ledger", "upload_bytes", "upload_file"]
