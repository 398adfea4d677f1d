"""Checking a bundle at an object store asks no size per file: one listing gives them.

An S3 file opened for reading first asks the store its size (a HEAD), one request
per file before its bytes; `verify_at` lists the bundle once and opens each file
with its listed size, and `delivered_at` (what `resume` asks) takes every size from
the same one listing where it asked one file at a time. Against moto's S3 API served from a thread of this process
(the fast tier starts no process), with s3fs's real requests counted.
"""

from __future__ import annotations

import hashlib
import json
import socket

import pytest

from conftest import needs
from storekit import aws_env

pytestmark = needs("s3fs", "moto")

FILES = 6


@pytest.fixture
def s3_in_thread(monkeypatch):
    from moto.server import ThreadedMotoServer

    for key, value in aws_env().items():
        monkeypatch.setenv(key, value)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


def small_bundle(root):
    bundle = root / "bundle"
    entries = []
    for i in range(FILES):
        rel = f"runs/r{i}/model.bin"
        data = bytes([i]) * (1000 + i)
        (bundle / rel).parent.mkdir(parents=True)
        (bundle / rel).write_bytes(data)
        entries.append({"path": rel, "bytes": len(data),
                        "sha256": hashlib.sha256(data).hexdigest(), "kind": "artifact"})
    (bundle / "manifest.json").write_text(json.dumps({"files": entries, "runs": []}))
    return bundle


def test_verify_at_the_store_lists_once_and_asks_no_size_per_file(s3_in_thread, tmp_path,
                                                                  monkeypatch):
    import s3fs

    from tui.store import open_store
    from tui.store.deliver import delivered_at, deliver_bundle, verify_at

    store = open_store("s3://camp/part", {"endpoint_url": s3_in_thread})
    store.fs.mkdir("camp")
    bundle = small_bundle(tmp_path)
    assert deliver_bundle(store, "bundle", bundle).verified
    asked = []  # every request s3fs makes: (its S3 operation, the key)
    real_call = s3fs.S3FileSystem._call_s3

    async def counted_call(self, method, *args, **kw):
        asked.append((method, kw.get("Key", kw.get("Prefix"))))
        return await real_call(self, method, *args, **kw)

    monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", counted_call)
    store.fs.invalidate_cache()
    check = verify_at(store, "bundle")
    assert check.verified and check.files == FILES + 1, check
    asked_sizes = [key for method, key in asked if method == "head_object"]
    assert asked_sizes == [], asked  # the sizes came from the one listing
    reads = sorted(key for method, key in asked if method == "get_object")
    assert reads == sorted(["part/bundle/manifest.json"] + [
        f"part/bundle/runs/r{i}/model.bin" for i in range(FILES)]), asked  # each file once

    # what `resume` asks of a bundle the index recorded verified: every file at its size
    asked.clear()
    check = delivered_at(store, "bundle", {"verified": True})
    assert check.verified and check.bytes == sum(1000 + i for i in range(FILES)), check
    assert [m for m, _ in asked if m == "head_object"] == [], asked  # one listing, no HEADs

    # a file gone since the listing's view is still said missing, a damaged one damaged
    store.fs.rm(store.path("bundle", "runs/r1/model.bin"))
    store.fs.pipe(store.path("bundle", "runs/r2/model.bin"), b"\x02" * 1002 + b"!")
    store.fs.invalidate_cache()
    check = verify_at(store, "bundle")
    assert not check.verified
    said = "\n".join(check.failures)
    assert "runs/r1/model.bin: missing at the store" in said, said
    assert "runs/r2/model.bin: 1003 bytes at the store, the manifest says 1002" in said, said
