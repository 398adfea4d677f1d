"""How fast the store is, measured: one timed round trip (write, read back, delete).

`itera-tui check --store` turns it into the calendar's delivery interval: the
expected bundle uploaded at the measured write rate, then read back whole at the
measured read rate (the verification at the store), plus a few requests per file.
A tiny request is timed first so a store far away (latency, not bandwidth) counts.
The probe object is random bytes under the part, `.probe-<random>`, removed after.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

from .layout import Layout
from .transfer import hash_remote, upload_bytes
from .url import Store

PROBE_BYTES = 4 << 20
REQUESTS_PER_FILE = 3  # upload, open and read back
TINY_ROUNDS = 5


@dataclass(frozen=True)
class StoreMeasure:
    """The store's rates (MB/s, 1 MB = 1e6 bytes) and a request's latency."""

    url: str
    probe_bytes: int
    write_mb_s: float
    read_mb_s: float
    request_s: float

    def delivery_s(self, bundle_bytes: int, files: int = 20) -> float:
        """Seconds to deliver a bundle and verify it there."""
        return (bundle_bytes / 1e6 / self.write_mb_s + bundle_bytes / 1e6 / self.read_mb_s
                + files * REQUESTS_PER_FILE * self.request_s)

    def to_dict(self) -> dict:
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in asdict(self).items()}


def measure(store: Store, part: str, size: int = PROBE_BYTES) -> StoreMeasure:
    """One round trip against the store (raises what the store raises)."""
    fs = store.fs
    name = store.path(Layout(part).key(f".probe-{os.urandom(6).hex()}"))
    tiny = name + "-tiny"
    data = os.urandom(size)
    try:
        upload_bytes(fs, b"x", tiny)  # the connection and the session, not timed
        t0 = time.perf_counter()
        for _ in range(TINY_ROUNDS):
            fs.info(tiny)
        request_s = (time.perf_counter() - t0) / TINY_ROUNDS
        t0 = time.perf_counter()
        upload_bytes(fs, data, name)
        write_s = max(1e-6, time.perf_counter() - t0 - request_s)
        t0 = time.perf_counter()
        back = hash_remote(fs, name)
        read_s = max(1e-6, time.perf_counter() - t0 - request_s)
        if back.bytes != size:
            raise OSError(f"the probe read back {back.bytes} of {size} bytes")
    finally:
        for path in (name, tiny):
            try:
                fs.rm(path)
            except (FileNotFoundError, OSError):
                pass
    return StoreMeasure(store.label, size, size / 1e6 / write_s, size / 1e6 / read_s,
                        request_s)
