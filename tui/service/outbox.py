"""What the engine has still to send its clients, kept as whole frames and bounded over all.

Each client's unsent bytes are kept frame by frame (one protocol line each),
so a client dropped for falling behind keeps only the frame it is in the
middle of and then gets the reason, as one more whole line, not half a
snapshot glued to it. The bounds are `OutboxLimits`: per client, over every
client together (100 clients that never read cost at most `total` bytes, not
100 times a snapshot), and how long a client may hold unsent bytes without
reading one before it is dropped. A dropped client reconnects from the last
seq it got, so it misses nothing (client.py).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True)
class OutboxLimits:
    per_client: int = 8 * 1024 * 1024  # bytes one client may fall behind (its past events do
    # not count: they are encoded as it reads, hub.queue_events)
    total: int = 16 * 1024 * 1024  # bytes all clients together may fall behind
    stall_s: float = 60.0  # unsent bytes and not one read for this long: behind
    linger_s: float = 2.0  # a dropped client's last frame and reason: this long to go out


class Outbox:
    """A client's unsent frames; `len()` is its unsent bytes."""

    __slots__ = ("frames", "offset", "size")

    def __init__(self):
        self.frames: deque[bytes] = deque()
        self.offset = 0  # bytes of the first frame already sent
        self.size = 0

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def append(self, data: bytes) -> None:
        self.frames.append(data)
        self.size += len(data)

    def peek(self, limit: int) -> bytes:
        """Up to `limit` bytes from the next unsent one (at least the rest of one frame)."""
        parts, n = [], 0
        for i, frame in enumerate(self.frames):
            part = frame[self.offset:] if i == 0 else frame
            parts.append(part)
            n += len(part)
            if n >= limit:
                break
        return b"".join(parts)

    def consume(self, sent: int) -> None:
        self.size -= sent
        while sent and self.frames:
            left = len(self.frames[0]) - self.offset
            if sent < left:
                self.offset += sent
                return
            sent -= left
            self.frames.popleft()
            self.offset = 0

    def cut_to_current(self) -> int:
        """Forget every frame not yet begun (the one half sent stays whole); bytes cut."""
        if not self.frames:
            return 0
        keep = self.frames[0] if self.offset else None
        before = self.size
        self.frames.clear()
        self.size = 0
        if keep is not None:
            self.frames.append(keep)
            self.size = len(keep) - self.offset
        else:
            self.offset = 0
        return before - self.size
