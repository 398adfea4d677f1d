"""A store write abandoned at its deadline may still land: its thread goes on until the
library gives up. A newer copy of the same name written meanwhile would be replaced by
the older bytes, under an index that names the newer (resume refuses the part as
damaged, or reads stale records). The writes of a name are fenced: the newer one waits
until the abandoned one has ended, so it always lands last (tui/store/transfer.py)."""

from __future__ import annotations

import threading

import fsspec
import pytest

from tui.store import transfer
from tui.store.transfer import BoundedFS, StoreNotAnswering, upload_bytes


class HungFirstCommit:
    """A memory store whose first commit (the close of an object written whole) hangs
    until released, then lands, as an S3 CompleteMultipartUpload answered late does."""

    protocol = "memory"

    def __init__(self, fs):
        self._fs = fs
        self.release = threading.Event()
        self.hung = threading.Event()
        self._first = True

    def __getattr__(self, name):
        return getattr(self._fs, name)

    def open(self, path, mode="rb", **kw):
        fh = self._fs.open(path, mode, **kw)
        if "w" not in mode or not self._first:
            return fh
        self._first = False
        store = self

        class Late:
            def __getattr__(self, name):
                return getattr(fh, name)

            def close(self):
                store.hung.set()
                store.release.wait(60)
                fh.close()

        return Late()


def test_a_newer_write_never_lands_before_an_abandoned_one_of_the_same_name():
    memory = fsspec.filesystem("memory", skip_instance_cache=True)
    memory.store.clear()
    hung = HungFirstCommit(memory)
    fs = BoundedFS(hung, stall_s=0.2)
    try:
        with pytest.raises(StoreNotAnswering):
            upload_bytes(fs, b"old index", "/part/index.json")
        assert hung.hung.is_set()
        with pytest.raises(StoreNotAnswering, match="an earlier write of /part/index.json is "
                                                    "still unanswered"):
            upload_bytes(fs, b"new index", "/part/index.json")
        upload_bytes(fs, b"other", "/part/other.json")  # another name is not held back
        hung.release.set()  # the abandoned commit lands, late
        late = transfer._late.get("/part/index.json")
        if late is not None:
            late.join(30)
        upload_bytes(fs, b"new index", "/part/index.json")
        assert memory.cat_file("/part/index.json") == b"new index"  # the newer, last
        assert memory.cat_file("/part/other.json") == b"other"
    finally:
        hung.release.set()
        memory.store.clear()
