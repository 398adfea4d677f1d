"""What is stored off the box and how far behind, as every face shows it.

A light record (stdlib only): the room's header gets it in the session's snapshot,
`itera-tui status` and the ending read the mirror's last one from
`.itera/store.json` (written by the mirror thread, replaced whole), so a face with
no live engine still says "off-box: 14/15 objects, 3 min behind". A store whose
requests were abandoned (they made no progress within transfer.STALL_S) is said to be
"not answering" for as long as it is (not only "behind"), and the verified
checkpoints it still lacks are named with the steps a box lost now would redo.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

STATUS_FILE = "store.json"  # tui.engine.moves reads it too (STORE_STATUS_FILE)


@dataclass(frozen=True)
class BundleAtStore:
    """The bundle delivered to the store, and whether it verified there."""

    url: str  # where it is (the store URL, no secret)
    verified: bool
    files: int
    bytes: int
    failures: tuple[str, ...] = ()  # "path: problem", bounded
    seconds: float | None = None
    t: float | None = None

    @property
    def why_not(self) -> str | None:
        """Why it is not verified at the store, in words (None when it is): the first
        failure, less the delivery's own "delivery failed: " prefix."""
        if self.verified:
            return None
        why = self.failures[0] if self.failures else "not verified at the store"
        return why.removeprefix("delivery failed: ")


@dataclass(frozen=True)
class MirrorStatus:
    url: str
    stored: int = 0  # objects stored whole (the ledger counts as one)
    total: int = 0  # stored + waiting
    behind_s: float | None = None  # age of the oldest thing not yet stored (None: none)
    down_since: float | None = None  # the store has failed since then (None: it answers)
    problem: str | None = None  # the last failure, in words
    ledger_bytes: int = 0  # of the ledger on this box
    ledger_stored: int = 0  # of those, stored and checked
    t: float = 0.0  # when this was true
    bundle: BundleAtStore | None = None
    kept: bool = False  # the store's ledger is longer or other: nothing written (a warning)
    silent_since: float | None = None  # a request abandoned unanswered: not answering since
    lacks: tuple[int, int, int | None] = (0, 0, None)  # verified checkpoints waiting, of how
    # many runs, and the steps a box lost now would redo for them (None: not known)

    @property
    def caught_up(self) -> bool:
        return self.stored >= self.total and self.ledger_stored >= self.ledger_bytes

    def text(self, now: float | None = None) -> str:
        """`off-box: 14/15 objects, 3 min behind` (and `store down since 14:02`)."""
        from ..campaign.units import human_duration

        behind = self.behind_s
        if behind is not None and now is not None and self.t:
            behind += max(0.0, now - self.t)
        tail = "up to date" if self.caught_up or behind is None else \
            f"{human_duration(behind)} behind"
        out = f"off-box: {self.stored}/{self.total} objects, {tail}"
        if self.silent_since is not None:
            silent = max(0.0, (now if now is not None else self.t) - self.silent_since)
            out += f"; store not answering for {human_duration(silent)}"
        elif self.down_since is not None:
            import time

            out += f"; store unreachable since {time.strftime('%H:%M', time.localtime(self.down_since))}"
        lacking = self.lacking_text()
        if lacking:
            out += f"; {lacking}"
        if self.kept:
            out += "; NOTHING written: the store keeps its own ledger (see the warning)"
        if self.bundle is not None:
            out += (f"; bundle {'verified' if self.bundle.verified else 'NOT verified'} "
                    f"at the store")
        return out

    def lacking_text(self) -> str | None:
        """`the store lacks 3 verified checkpoints of 2 runs: a lost box would redo 1200
        steps` (None when it lacks none)."""
        n, runs, steps = self.lacks
        if not n:
            return None
        out = (f"the store lacks {n} verified checkpoint{'s' if n != 1 else ''} of {runs} "
               f"run{'s' if runs != 1 else ''}")
        if steps:
            out += f": a lost box would redo {steps:,} steps"
        return out

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict) -> "MirrorStatus | None":
        if not isinstance(raw, dict) or not isinstance(raw.get("url"), str):
            return None
        b = raw.get("bundle")
        bundle = None
        if isinstance(b, dict) and isinstance(b.get("url"), str):
            bundle = BundleAtStore(b["url"], bool(b.get("verified")), int(b.get("files") or 0),
                                   int(b.get("bytes") or 0),
                                   tuple(str(x) for x in (b.get("failures") or ())[:20]),
                                   b.get("seconds"), b.get("t"))

        def num(key, default=None):
            v = raw.get(key)
            return v if isinstance(v, (int, float)) and not isinstance(v, bool) else default

        lacks = raw.get("lacks")
        if not (isinstance(lacks, list) and len(lacks) == 3 and all(
                isinstance(x, int) and not isinstance(x, bool) for x in lacks[:2])
                and (lacks[2] is None or isinstance(lacks[2], int))):
            lacks = (0, 0, None)
        return cls(raw["url"], int(num("stored", 0)), int(num("total", 0)), num("behind_s"),
                   num("down_since"), raw.get("problem") if isinstance(raw.get("problem"), str)
                   else None, int(num("ledger_bytes", 0)), int(num("ledger_stored", 0)),
                   float(num("t", 0.0)), bundle, raw.get("kept") is True,
                   num("silent_since"), tuple(lacks))


def write_status(state_dir: Path, status: MirrorStatus) -> None:
    tmp = Path(state_dir) / (STATUS_FILE + ".tmp")
    tmp.write_text(json.dumps(status.to_dict()))
    os.replace(tmp, Path(state_dir) / STATUS_FILE)


def read_status(state_dir: Path) -> MirrorStatus | None:
    """The mirror's last word, None when there is none (no [store], or never started)."""
    try:
        text = (Path(state_dir) / STATUS_FILE).read_text()
        return MirrorStatus.from_dict(json.loads(text)) if len(text) < 1 << 20 else None
    except (OSError, ValueError):
        return None
