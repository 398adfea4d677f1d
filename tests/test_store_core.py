"""The store's core against a real S3 API (moto's server on 127.0.0.1) and a local
folder: URLs and options, streamed uploads checked by hash, the ledger as byte
ranges re-assembled and checked against the index, a part fetched back."""

from __future__ import annotations

import hashlib

import pytest

from conftest import needs
from storekit import s3  # noqa: F401  (the fixture)
from tui.campaign.loading.sections import secret_options
from tui.store import (Layout, ObjectKind, StoreError, StoreIndex, StoredObject, fetch_part,
                       list_parts, open_store, read_index, read_ledger, upload_bytes,
                       upload_file)

pytestmark = needs("s3fs", "moto")


def test_secret_looking_options_are_refused():
    assert secret_options({"endpoint_url": "http://h", "profile": "p", "region_name": "x",
                           "client_keys": ["~/.ssh/id"]}) == []
    assert secret_options({"key": "a", "secret": "b", "client_kwargs": {
        "aws_session_token": "t"}, "endpoint_url": "http://u:pw@h"}) == [
        "options.client_kwargs.aws_session_token", "options.endpoint_url", "options.key",
        "options.secret"]
    with pytest.raises(StoreError, match="look like secrets"):
        open_store("s3://b/p", {"password": "x"})


def _push_ledger(store, layout, text: bytes, cut: int) -> StoreIndex:
    fs = store.fs
    upload_bytes(fs, text[:cut], store.path(layout.ledger_segment(0, cut)))
    upload_bytes(fs, text[cut:], store.path(layout.ledger_segment(cut, len(text))))
    index = StoreIndex(layout.part, len(text), hashlib.sha256(text).hexdigest())
    upload_bytes(fs, index.to_json().encode(), store.path(layout.index))
    return index


@pytest.mark.slow
def test_ledger_ranges_and_checkpoint_round_trip_through_s3(s3, tmp_path):  # noqa: F811
    bucket = s3.make_bucket("camp")
    store = open_store(f"{bucket}/team/c1", s3.options())
    layout = Layout("lot1")
    ledger = b"".join(b'{"seq": %d}\n' % i for i in range(1, 200))
    index = _push_ledger(store, layout, ledger, 1000)
    ckpt = tmp_path / "ck.bin"
    ckpt.write_bytes(bytes(range(256)) * 40000)  # ~10 MB: more than one chunk
    moved = upload_file(store.fs, ckpt, store.path(layout.checkpoint("r1", "ck.bin")))
    assert moved.sha256 == hashlib.sha256(ckpt.read_bytes()).hexdigest()
    index = index.with_object(StoredObject(layout.checkpoint("r1", "ck.bin"), moved.bytes,
                                           moved.sha256, ObjectKind.CHECKPOINT, "r1",
                                           ".itera/runs/r1/ck.bin"))
    upload_bytes(store.fs, index.to_json().encode(), store.path(layout.index))

    assert list_parts(store) == ["lot1"]
    assert read_ledger(store, "lot1") == ledger
    dest = tmp_path / "back"
    got = fetch_part(store, "lot1", dest)
    assert got.problems == ()
    assert (dest / ".itera/ledger.jsonl").read_bytes() == ledger
    assert (dest / ".itera/runs/r1/ck.bin").read_bytes() == ckpt.read_bytes()

    # a stored range altered: the ledger no longer matches the index, said in words
    store.fs.pipe(store.path(layout.ledger_segment(0, 1000)), b"x" * 1000)
    with pytest.raises(StoreError, match="sha256"):
        read_ledger(store, "lot1")
    upload_bytes(store.fs, ledger[:1000], store.path(layout.ledger_segment(0, 1000)))
    assert read_ledger(store, "lot1") == ledger
    # a checkpoint altered: not laid down under its name, and named
    store.fs.pipe(store.path(layout.checkpoint("r1", "ck.bin")), b"bad")
    (dest / ".itera/runs/r1/ck.bin").unlink()
    got = fetch_part(store, "lot1", dest)
    assert len(got.problems) == 1 and "lot1/checkpoints/r1/ck.bin" in got.problems[0]
    assert not (dest / ".itera/runs/r1/ck.bin").exists()


def test_local_folder_store_renames_only_whole_files(tmp_path):
    store = open_store(f"file://{tmp_path}/store")
    layout = Layout("lot1")
    ledger = b'{"seq": 1}\n{"seq": 2}\n'
    _push_ledger(store, layout, ledger, 11)
    assert read_ledger(store, "lot1") == ledger
    assert read_index(store, "lot1").ledger_bytes == len(ledger)
    assert not list((tmp_path / "store").rglob("*.part"))
    (tmp_path / "store/lot1/ledger" / f"{11:014d}-{len(ledger):014d}.jsonl").unlink()
    with pytest.raises(StoreError, match="bytes"):
        read_ledger(store, "lot1")
