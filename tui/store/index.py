"""A part's catalog, `index.json`: the only list of what is stored whole.

The mirror rewrites it after every object it stored and checked, so an object is
"in the store" when its entry is, never before (a box that dies mid-upload leaves a
stray object, not a lie). It also records how much of the ledger is stored
(length and sha256 of the prefix), which a reader checks the segments against.
Read as hostile input: a malformed index is an error in words, not a traceback.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

FORMAT = "itera-store/1"
NEXT_SLOT = ".next"  # a run's records stored again: the slot the index does not name
_HEX64 = re.compile(r"[0-9a-f]{64}")
MAX_INDEX_BYTES = 32 << 20


class IndexError_(ValueError):
    """index.json cannot be trusted; the message says why."""


@dataclass(frozen=True)
class StoredObject:
    """One object stored whole: its key below the part, size, sha256 and what it is."""

    key: str
    bytes: int
    sha256: str
    kind: str  # layout.ObjectKind
    run: str | None = None
    source: str | None = None  # where it came from in the campaign folder (relative)
    t: float = 0.0
    files: int | None = None  # a folder (folders.py): its number of files; sha256 is its
    # tree sha256, and its manifest lists each file (None: a single file)

    def to_dict(self) -> dict:
        return {"key": self.key, "bytes": self.bytes, "sha256": self.sha256,
                "kind": self.kind, "run": self.run, "source": self.source, "t": self.t,
                **({"files": self.files} if self.files is not None else {})}


@dataclass(frozen=True)
class CampaignId:
    """Which campaign a part belongs to: when it started (its `campaign_started` time)
    and its frozen plan's sha256. A store prefix holds one campaign: a restart or a move
    of it has the same identity (its ledger is the same), a new one never does."""

    started: float
    plan_sha256: str | None = None

    @classmethod
    def of_state(cls, state) -> "CampaignId | None":
        """A replayed campaign's identity (None before it started)."""
        if state.started_t is None:
            return None
        return cls(float(state.started_t), state.plan_sha256)

    def to_dict(self) -> dict:
        return {"started": self.started, "plan_sha256": self.plan_sha256}

    @classmethod
    def from_dict(cls, raw) -> "CampaignId | None":
        if not isinstance(raw, dict) or not isinstance(raw.get("started"), (int, float)) \
                or isinstance(raw.get("started"), bool):
            return None
        sha = raw.get("plan_sha256")
        return cls(float(raw["started"]), sha if isinstance(sha, str) else None)


@dataclass(frozen=True)
class StoreIndex:
    part: str
    ledger_bytes: int = 0
    ledger_sha256: str | None = None
    ledger_t: float | None = None  # ledger time of the last event stored
    objects: tuple[StoredObject, ...] = ()
    bundle: dict | None = field(default=None)  # {"key", "verified", "files", "bytes", "t"}
    campaign: CampaignId | None = None  # whose part this is (None: an index from before)

    def with_object(self, obj: StoredObject, replaces: str | None = None) -> "StoreIndex":
        """`obj` listed (in place of the entry under its key, and of `replaces`: an
        earlier copy of the same file stored under another key)."""
        kept = tuple(o for o in self.objects if o.key not in (obj.key, replaces))
        return replace(self, objects=kept + (obj,))

    def object(self, key: str) -> StoredObject | None:
        return next((o for o in self.objects if o.key == key), None)

    def stored(self, key: str) -> StoredObject | None:
        """The object stored under `key`, in either of its slots (`<key>`, `<key>.next`:
        a run's records and logs stored again, mirror.py `_fresh_key`)."""
        return self.object(key) or self.object(key + NEXT_SLOT)

    def of_kind(self, kind: str) -> tuple[StoredObject, ...]:
        return tuple(o for o in self.objects if o.kind == kind)

    def to_json(self) -> str:
        return json.dumps({"format": FORMAT, "part": self.part,
                           "ledger": {"bytes": self.ledger_bytes, "sha256": self.ledger_sha256,
                                      "t": self.ledger_t},
                           "objects": [o.to_dict() for o in self.objects],
                           "bundle": self.bundle,
                           "campaign": self.campaign.to_dict() if self.campaign else None},
                          indent=1) + "\n"

    @classmethod
    def from_json(cls, text: str) -> "StoreIndex":
        try:
            raw = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise IndexError_(f"index.json is not JSON ({exc})") from None
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise IndexError_(f"index.json is not an {FORMAT} index")
        ledger = raw.get("ledger") if isinstance(raw.get("ledger"), dict) else {}
        lb = ledger.get("bytes", 0)
        ls = ledger.get("sha256")
        if not isinstance(lb, int) or lb < 0 or (ls is not None and not (
                isinstance(ls, str) and _HEX64.fullmatch(ls))):
            raise IndexError_("index.json: ledger length or sha256 unreadable")
        objects = []
        for i, o in enumerate(raw.get("objects") or []):
            if not (isinstance(o, dict) and isinstance(o.get("key"), str)
                    and isinstance(o.get("bytes"), int) and isinstance(o.get("sha256"), str)
                    and _HEX64.fullmatch(o["sha256"]) and isinstance(o.get("kind"), str)):
                raise IndexError_(f"index.json: objects[{i}] is not a stored object")
            t, files = o.get("t"), o.get("files")
            if files is not None and not (isinstance(files, int) and files > 0
                                          and not isinstance(files, bool)):
                raise IndexError_(f"index.json: objects[{i}] has an unreadable file count")
            objects.append(StoredObject(o["key"], o["bytes"], o["sha256"], o["kind"],
                                        o.get("run") if isinstance(o.get("run"), str) else None,
                                        o.get("source") if isinstance(o.get("source"), str)
                                        else None,
                                        float(t) if isinstance(t, (int, float)) else 0.0,
                                        files))
        bundle = raw.get("bundle") if isinstance(raw.get("bundle"), dict) else None
        lt = ledger.get("t")
        return cls(part=str(raw.get("part") or ""), ledger_bytes=lb, ledger_sha256=ls,
                   ledger_t=float(lt) if isinstance(lt, (int, float)) else None,
                   objects=tuple(objects), bundle=bundle,
                   campaign=CampaignId.from_dict(raw.get("campaign")))
