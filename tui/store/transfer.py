"""Streamed copies between this disk and a store, hashed on the way (bounded memory).

Every copy goes in `CHUNK` pieces and hashes what it moves, so a 20 GB checkpoint
costs a few MiB of memory and its sha256 comes for free. An upload to an object
store (s3, gcs, azure) is invisible until whole, so it goes straight to its name;
to a filesystem that can show a half-written file (sftp, a local mount) it goes to
`<name>.part` first and is renamed when complete. A download goes to `<dest>.part`
and is renamed only when its length and hash are those expected.

Every request to a store has a deadline this module enforces itself (`BoundedFS`):
a library's read timeout bounds each read, not the request (an upload was seen hung
33 min with `read_timeout=60`), and a store that accepts connections and never
answers hangs whoever waits. A request that makes no progress for `STALL_S` is
abandoned: its thread is left to the library's own timeout, nothing it was writing is
committed by us, and `StoreNotAnswering` says so (the mirror counts it as the store
down). Object-store uploads go in `UPLOAD_PART` parts, so each request is small enough
to finish within the deadline on any store faster than about 45 KB/s. While a request
waits, the waiting thread's hook (`while_waiting`) is called every `WAIT_SAY_S`: the
mirror's thread, blocked for up to STALL_S on a store that does not answer, still takes
the engine's news and says what the store lacks.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

CHUNK = 8 << 20
STALL_S = 120.0  # a store request with no progress this long is abandoned (not answering)
STUCK_MAX = 16  # abandoned requests still alive at once; beyond, no new one is started
WAIT_SAY_S = 1.0  # a waiting thread's hook is called this often while its request waits
UPLOAD_PART = 5 << 20  # an object store's upload part (S3's smallest): one request each
WHOLE_ON_CLOSE = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "adl", "memory")


@dataclass(frozen=True)
class Moved:
    """One copy's result: bytes moved and their sha256."""

    bytes: int
    sha256: str


def _protocol(fs) -> str:
    proto = fs.protocol
    return proto[0] if isinstance(proto, (tuple, list)) else str(proto)


def _parent(path: str) -> str:
    return path.rsplit("/", 1)[0] if "/" in path.strip("/") else ""


class LocalGone(OSError):
    """The local file to send is gone or unreadable (a rotated checkpoint): not the store's
    failure, so never a "store down"."""


def upload_file(fs, local: Path, remote: str, *, limit: int | None = None,
                tail: bool = False, run_controlled: bool = False) -> Moved:
    """Copy `local` to `remote` streaming, hashing what was sent; `limit`: at most that
    many bytes (the last ones with `tail`). Atomic for the reader (see above). The local
    file is opened before the store is touched: LocalGone when it cannot be.
    `run_controlled`: a file a run can swap (its records, its deliverables) is opened
    only as a regular file and never through a link at its end (a FIFO would block the
    mirror, a link would send what it points at); LocalGone otherwise."""
    try:
        if run_controlled:
            from ..engine.reading.regular_files import open_regular

            fh = os.fdopen(open_regular(local, os.O_RDONLY | os.O_NOFOLLOW), "rb")
        else:
            fh = open(local, "rb")
        size = os.fstat(fh.fileno()).st_size
    except OSError as exc:
        raise LocalGone(f"{local}: {exc.strerror or exc}") from None
    with fh:
        start = max(0, size - limit) if (limit is not None and tail) else 0
        todo = size - start if limit is None or tail else min(size, limit)
        return _upload_stream(fs, _chunks(fh, start, todo), remote)


def upload_bytes(fs, data: bytes, remote: str) -> Moved:
    return _upload_stream(fs, iter((data,)), remote)


def _chunks(fh, start: int, todo: int):
    fh.seek(start)
    while todo > 0:
        block = fh.read(min(CHUNK, todo))
        if not block:
            break
        todo -= len(block)
        yield block


def _upload_stream(fs, blocks, remote: str) -> Moved:
    token = _writing.set(remote)  # every request below writes `remote`: fenced as one
    try:
        return _upload_to(fs, blocks, remote)
    finally:
        _writing.reset(token)


def _upload_to(fs, blocks, remote: str) -> Moved:
    direct = _protocol(fs) in WHOLE_ON_CLOSE
    target = remote if direct else remote + ".part"
    parent = _parent(remote)
    if parent and not direct:
        fs.makedirs(parent, exist_ok=True)
    digest, n = hashlib.sha256(), 0
    with fs.open(target, "wb", **({"block_size": UPLOAD_PART} if direct else {})) as out:
        for block in blocks:
            digest.update(block)
            out.write(block)
            n += len(block)
    if not direct:
        if fs.exists(remote):
            fs.rm(remote)
        fs.mv(target, remote)
    return Moved(n, digest.hexdigest())


def remote_size(fs, remote: str) -> int | None:
    try:
        info = fs.info(remote)
    except StoreNotAnswering:
        raise  # not an answer: the store is not answering (never "no such object")
    except (FileNotFoundError, OSError):
        return None
    size = info.get("size")
    return int(size) if isinstance(size, int) else None


def listed_sizes(fs, root: str) -> dict[str, int]:
    """Every object under `root` with its size, from one listing: what a whole folder's
    reads open with (`listed=`) where each open would first ask the store for the size
    (one request per file). Empty when the store cannot list it (each read asks then)."""
    try:
        found = fs.find(root, detail=True)
    except StoreNotAnswering:
        raise  # not an answer: the store is not answering (never "nothing there")
    except (OSError, ValueError, TypeError):
        return {}
    if not isinstance(found, dict):
        return {}
    return {path.rstrip("/"): int(info["size"]) for path, info in found.items()
            if isinstance(info, dict) and isinstance(info.get("size"), int)}


def _open_read(fs, remote: str, listed: int | None):
    """`remote` opened for reading (CHUNK blocks); `listed`, its size from a listing, spares the
    store the request for it (an object rewritten since reads short, or its bytes differ:
    both caught by the size or digest the caller checks)."""
    extra = {} if listed is None else {"size": listed}
    return fs.open(remote, "rb", block_size=CHUNK, **extra)


def hash_remote(fs, remote: str, listed: int | None = None) -> Moved:
    """Read `remote` back in chunks and hash it (FileNotFoundError when absent)."""
    digest, n = hashlib.sha256(), 0
    with _open_read(fs, remote, listed) as fh:
        while True:
            block = fh.read(CHUNK)
            if not block:
                break
            digest.update(block)
            n += len(block)
    return Moved(n, digest.hexdigest())


def download_file(fs, remote: str, dest: Path, *, sha256: str | None = None,
                  size: int | None = None, listed: int | None = None) -> Moved:
    """Copy `remote` to `dest` streaming; with `sha256`/`size` the copy is kept only if
    it matches (ValueError names the difference), so a partial file never takes its name.
    `listed`: its size from a listing (see `listed_sizes`)."""
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(dest.name + ".part")
    digest, n = hashlib.sha256(), 0
    try:
        with _open_read(fs, remote, listed) as fh, open(tmp, "wb") as out:
            while True:
                block = fh.read(CHUNK)
                if not block:
                    break
                digest.update(block)
                out.write(block)
                n += len(block)
        moved = Moved(n, digest.hexdigest())
        if size is not None and n != size:
            raise ValueError(f"{remote}: {n} bytes in the store, {size} expected")
        if sha256 is not None and moved.sha256 != sha256:
            raise ValueError(f"{remote}: sha256 differs from the one recorded")
        os.replace(tmp, dest)
        return moved
    finally:
        if tmp.exists():
            tmp.unlink()


# -- every store request under a deadline ---------------------------------------------------
class StoreNotAnswering(TimeoutError):
    """A store request made no progress for its deadline and was abandoned: the store
    is not answering (the mirror says it is down, once, and retries with its backoff)."""


class _Watch:
    """A request's progress: each tick (a part sent, a file put) moves its deadline;
    `abandoned` once the waiter gave up (a long call checks it before it commits)."""

    def __init__(self):
        self.last = time.monotonic()
        self.abandoned = False

    def tick(self, *_args, **_kw) -> None:
        self.last = time.monotonic()


_stuck: set[threading.Thread] = set()  # abandoned request threads still alive
_stuck_lock = threading.Lock()
# An abandoned write may still land (its thread goes on until the library gives up):
# a newer copy written to the same name meanwhile would then be replaced by the older
# bytes under an index that names the newer. So the writes of a name (`_writing`) are
# fenced: while an abandoned one is alive, a new write of that name is not started (the
# store is still not answering it), and the newer copy goes only after it has ended.
_late: dict[str, threading.Thread] = {}
_writing: contextvars.ContextVar[str | None] = contextvars.ContextVar("itera_store_writing",
                                                                      default=None)


_on_wait: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "itera_store_on_wait", default=None)


def while_waiting(hook: Callable[[], None]) -> None:
    """`hook()` is called on this thread every WAIT_SAY_S while one of its requests
    waits for the store (the mirror: its status kept true while the store hangs). It
    must neither call the store nor raise (the request it interrupts would be left
    untracked)."""
    _on_wait.set(hook)


def _fenced(target: str | None) -> None:
    """StoreNotAnswering while an abandoned write of `target` may still land."""
    if target is None:
        return
    with _stuck_lock:
        earlier = _late.get(target)
        if earlier is not None and not earlier.is_alive():
            del _late[target]
            earlier = None
    if earlier is not None:
        raise StoreNotAnswering(f"the store did not answer: an earlier write of {target} is "
                                "still unanswered (not written over until it has ended)")


def bounded(call, what: str, stall_s: float | None = None, words: str | None = None):
    """`call(watch)` on a worker thread, waited for while it progresses: no progress
    (`watch.tick`) for `stall_s` (default STALL_S) and it is abandoned with
    StoreNotAnswering. An fsspec call cannot be interrupted: its thread is left behind
    (a daemon, ended by the library's own timeout); at most STUCK_MAX are left at once.
    `words`: the StoreNotAnswering's message instead of the default."""
    stall = STALL_S if stall_s is None else stall_s
    target = _writing.get()
    _fenced(target)
    with _stuck_lock:
        _stuck.difference_update([t for t in _stuck if not t.is_alive()])
        for ended in [name for name, t in _late.items() if not t.is_alive()]:
            del _late[ended]
        if len(_stuck) >= STUCK_MAX:
            raise StoreNotAnswering(f"the store did not answer: {len(_stuck)} earlier "
                                    f"requests still unanswered ({what} not tried)")
    watch, box, done = _Watch(), {}, threading.Event()

    def work():
        try:
            box["value"] = call(watch)
        except BaseException as exc:  # handed to the caller below
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=work, name="itera-store-request", daemon=True)
    worker.start()
    hook = _on_wait.get()
    while not done.wait(max(0.01, min(WAIT_SAY_S, watch.last + stall - time.monotonic()))):
        if hook is not None:
            _on_wait.set(None)  # never re-entered by a request of the hook's own
            try:
                hook()
            finally:
                _on_wait.set(hook)
        if time.monotonic() - watch.last >= stall:
            watch.abandoned = True
            with _stuck_lock:
                _stuck.add(worker)
                if target is not None:
                    _late[target] = worker
            raise StoreNotAnswering(words or f"the store did not answer: {what} made no "
                                    f"progress for {stall:g} s")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _ticks(watch: _Watch):
    """An fsspec callback that ticks `watch` on every update, its children too (put and
    get report each part or file they move)."""
    from fsspec.callbacks import Callback

    class Ticks(Callback):
        def call(self, hook_name=None, **kwargs):
            watch.tick()

        def branched(self, path_1, path_2, **kwargs):
            watch.tick()
            return Ticks()

    return Ticks()


class BoundedFS:
    """A store's fsspec filesystem whose every call, and every read, write and close of
    a file it opens, is one request under `bounded`. Attributes pass through."""

    def __init__(self, fs, stall_s: float | None = None):
        self._fs = fs
        self._stall_s = stall_s

    @property
    def inner(self):
        return self._fs

    def __getattr__(self, name):
        attr = getattr(self._fs, name)
        if not callable(attr) or name.startswith("_") or name in _LOCAL:
            return attr

        def call(*args, **kw):
            def run(watch):
                if name in ("put", "get", "put_file", "get_file") and "callback" not in kw:
                    kw["callback"] = _ticks(watch)
                return attr(*args, **kw)
            return bounded(run, name, self._stall_s)
        return call

    def open(self, *args, **kw):
        fh = bounded(lambda _w: self._fs.open(*args, **kw), "open", self._stall_s)
        return BoundedFile(fh, self._stall_s)


_LOCAL = frozenset({"unstrip_protocol", "invalidate_cache"})


class BoundedFile:
    """A file of a BoundedFS: reads, writes and the close (an object store's commit)
    each under the deadline. A write that fails or is abandoned is never committed by
    closing it (an object store would keep the part sent under the final name)."""

    def __init__(self, fh, stall_s: float | None):
        self._fh = fh
        self._stall_s = stall_s

    def __getattr__(self, name):
        return getattr(self._fh, name)

    def read(self, *args):
        return bounded(lambda _w: self._fh.read(*args), "read", self._stall_s)

    def write(self, data):
        return bounded(lambda _w: self._fh.write(data), "write", self._stall_s)

    def close(self):
        return bounded(lambda _w: self._fh.close(), "close", self._stall_s)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None or "r" in getattr(self._fh, "mode", "r"):
            try:
                self.close()
            except StoreNotAnswering:
                if exc_type is None:
                    raise
            return False
        if isinstance(exc, StoreNotAnswering):
            return False  # the abandoned call still holds the file: left alone
        discard = getattr(self._fh, "discard", None)
        try:  # an object store's upload aborted; a local `.part` file closed, never renamed
            bounded(lambda _w: (discard or self._fh.close)(), "discard", self._stall_s)
        except Exception:
            pass
        return False


class BoundedStore:
    """A Store (url.py) whose filesystem is a BoundedFS: what the mirror, the delivery
    and the probe use, so that no store request of theirs can hang."""

    def __init__(self, store, stall_s: float | None = None):
        self._store = store
        self._stall_s = stall_s
        self._bounded: tuple | None = None

    def __getattr__(self, name):
        return getattr(self._store, name)

    @property
    def fs(self):
        fs = self._store.fs  # a store that cannot be opened raises here
        if isinstance(fs, BoundedFS):
            return fs
        if self._bounded is None or self._bounded[0] is not fs:
            self._bounded = (fs, BoundedFS(fs, self._stall_s))
        return self._bounded[1]
