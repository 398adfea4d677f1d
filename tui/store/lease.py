"""One box drives a campaign at a time: the store's lease and its fencing number.

Two boxes that both believe they hold a campaign launch, and pay for, every run
twice and write the same store. "Its engine wrote a moment ago" is a guess; this
is a lock that works on any fsspec store, S3, sftp and a folder alike, with plain
puts and a listing (a conditional put is not offered everywhere):

    <url>/<part>/lease/<fence:08d>-<holder>.json

Each claimant (an engine starting a campaign, a `resume` taking it over) writes
its OWN claim object, never another's, with the next fence (one more than the
highest it lists). The campaign's holder is the claim with the highest fence; two
claims with one fence (two resumes started at the same moment) are ordered by the
holder's name, the smaller wins: every reader, listing the same names, picks the
same holder, and the names alone say it (one LIST, no read). A claimant reads the
listing back after writing, a settle time later, so a rival that listed before
this claim existed has written its own by then and both see the same winner.

The holder renews its claim (rewrites it with the time, `RENEW_S`) on a thread of
its own; a claim not renewed for `TTL_S` is stale (its box is gone or cut off), and
one that says `released` was left by an engine that stopped. A resume takes the
campaign only when the holder's claim is stale or released, or with `--force`.
Every writer (the mirror before each ledger range, object and index; the delivery)
calls `ensure()`, which lists the claims and raises `Superseded` once a higher one
exists: a superseded engine never writes the store again, stops its runs after a
checkpoint (the box-going-down path) and says which box took the campaign. A store
that does not answer is no proof of anything: the runs go on, and the first
answer decides.

The holder's name (`<host>-<token>`) and fence stay in `.itera/lease.json`, so
`resume` hands its claim to the engine it starts, and an engine restarted on the
same box keeps its own.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import socket
import threading
import time
from dataclasses import asdict, dataclass
from enum import Enum
from pathlib import Path
from typing import Callable

LEASE_DIR = "lease"
LOCAL_FILE = "lease.json"  # in .itera/: this folder's claim (holder, fence)
TTL_S = 60.0  # a claim not renewed for this long is stale: its box is gone or cut off
RENEW_S = 10.0  # how often the holder renews (and checks) its claim
SETTLE_S = 3.0  # a claimant reads back this long after writing (a rival's list-to-put)
FENCE_DIGITS = 8
_NAME = re.compile(r"^(\d{%d})-([A-Za-z0-9._-]{1,120})\.json$" % FENCE_DIGITS)


class Superseded(Exception):
    """Another box holds the campaign now: nothing more is written to the store."""

    def __init__(self, winner: "Claim", mine: "Claim | None" = None):
        self.winner = winner
        self.mine = mine
        super().__init__(winner.superseded_words())


class LeaseHeld(Exception):
    """A live holder (a fresh, unreleased claim) keeps the campaign: not taken."""

    def __init__(self, holder: "Claim", now: float):
        self.holder = holder
        super().__init__(
            f"box {holder.host} (holder {holder.holder}) holds this campaign (lease fence "
            f"{holder.fence}, renewed "
            f"{max(0.0, now - holder.renewed):.0f} s ago): its engine may still be driving "
            "it. Stop it there (`itera-tui engine stop`), or, if that box is gone, pass "
            "--force (that engine then stops its runs after a checkpoint and writes nothing "
            "more to the store)")


class LeaseRefused(Exception):
    """`resume` does not take the campaign: one sentence naming the box that holds it."""


def host_label() -> str:
    """This box's name as a claim carries it (file-name safe)."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", socket.gethostname())[:60] or "box"


def _host_of(holder: str) -> str:
    return holder.rsplit("-", 1)[0] or holder


def new_holder() -> str:
    """A name for a new claimant: the box's, and a token two claimants never share."""
    return f"{host_label()}-{secrets.token_hex(4)}"


@dataclass(frozen=True)
class Claim:
    """One claim object: who, which fence, when it was last renewed (holder's clock)."""

    fence: int
    holder: str
    host: str = "?"
    renewed: float = 0.0
    ttl_s: float = TTL_S
    released: bool = False

    @property
    def name(self) -> str:
        return f"{self.fence:0{FENCE_DIGITS}d}-{self.holder}.json"

    @property
    def rank(self) -> tuple:
        """Sorting key: the smallest is the holder (highest fence; then the smaller name)."""
        return (-self.fence, self.holder)

    def live(self, now: float) -> bool:
        return not self.released and now - self.renewed < self.ttl_s

    def superseded_words(self) -> str:
        return (f"superseded by box {self.host} (holder {self.holder}, lease fence "
                f"{self.fence}): another box took this campaign")

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), sort_keys=True).encode()

    @classmethod
    def parse_name(cls, name: str) -> "Claim | None":
        """A claim as its object's name says it (fence, holder), or None."""
        m = _NAME.match(name.rsplit("/", 1)[-1])
        if m is None:
            return None
        holder = m.group(2)
        return cls(int(m.group(1)), holder, host=_host_of(holder))

    @classmethod
    def from_json(cls, data: bytes, named: "Claim") -> "Claim":
        """The stored claim's body; its fence and holder are its name's, whatever it says."""
        try:
            body = json.loads(data.decode("utf-8"))
            return cls(named.fence, named.holder, host=str(body.get("host") or named.host),
                       renewed=float(body.get("renewed") or 0.0),
                       ttl_s=float(body.get("ttl_s") or TTL_S),
                       released=bool(body.get("released")))
        except (ValueError, TypeError, AttributeError, UnicodeDecodeError):
            return named  # unreadable: renewed at 0, so stale; its rank still counts


def winner(claims) -> Claim | None:
    """The campaign's holder among `claims` (names alone decide)."""
    return min(claims, key=lambda c: c.rank, default=None)


class LeaseState(Enum):
    UNKNOWN = "unknown"  # not yet confirmed at the store (down at the start)
    HELD = "held"
    SUPERSEDED = "superseded"


@dataclass(frozen=True)
class Local:
    """`.itera/lease.json`: this folder's claim."""

    holder: str
    fence: int

    @classmethod
    def read(cls, state_dir: Path) -> "Local | None":
        try:
            data = json.loads((Path(state_dir) / LOCAL_FILE).read_text())
            return cls(str(data["holder"]), int(data["fence"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def write(self, state_dir: Path) -> None:
        path = Path(state_dir) / LOCAL_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)


class Lease:
    """One claimant's side of the lease on one part of one store."""

    def __init__(self, store, part: str, holder: str | None = None, *,
                 state_dir: Path | None = None, clock: Callable[[], float] = time.time,
                 ttl_s: float = TTL_S, settle_s: float | None = None):
        self.store = store
        self.part = part
        self.state_dir = state_dir  # the engine's folder: its claim kept in lease.json
        self.holder = holder or new_holder()
        self.clock = clock
        self.ttl_s = ttl_s
        # read when a claimant is made, not when this module was (tests/conftest.py
        # shortens it for claims made inside a test's own process)
        self.settle_s = SETTLE_S if settle_s is None else settle_s
        self.mine: Claim | None = None
        self.state = LeaseState.UNKNOWN
        self.winner: Claim | None = None  # who superseded this claimant
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- the store -----------------------------------------------------------------
    @property
    def dir(self) -> str:
        return self.store.path(f"{self.part}/{LEASE_DIR}")

    def claims(self) -> list[Claim]:
        """Every claim object's name, listed now (never a cached listing)."""
        fs = self.store.fs
        try:
            fs.invalidate_cache(self.dir)
        except Exception:  # noqa: BLE001 - a filesystem without a cache
            pass
        try:
            names = fs.ls(self.dir, detail=False)
        except FileNotFoundError:
            return []
        return [c for c in map(Claim.parse_name, map(str, names)) if c is not None]

    def read(self, named: Claim) -> Claim:
        """A claim's body (its renewal, whether released); stale when it is gone."""
        try:
            data = self.store.fs.cat_file(f"{self.dir}/{named.name}", start=0, end=4096)
        except FileNotFoundError:
            return named
        return Claim.from_json(data, named)

    def _put(self, claim: Claim) -> None:
        from .transfer import upload_bytes

        upload_bytes(self.store.fs, claim.to_json(), f"{self.dir}/{claim.name}")

    def holder_now(self) -> Claim | None:
        """The campaign's holder as the store says it now, its body read."""
        top = winner(self.claims())
        return None if top is None else self.read(top)

    # -- taking it -----------------------------------------------------------------------
    def acquire(self, force: bool = False) -> Claim:
        """Take the campaign with the next fence; LeaseHeld when a live holder keeps it
        (without `force`), Superseded when a rival claiming at the same moment won."""
        with self._lock:
            claims = self.claims()
            top = winner(claims)
            now = self.clock()
            if top is not None and top.holder != self.holder and not force:
                body = self.read(top)
                if body.live(now):
                    raise LeaseHeld(body, now)
            fence = max((c.fence for c in claims), default=0) + 1
            mine = Claim(fence, self.holder, _host_of(self.holder), now, self.ttl_s)
            self._put(mine)
            self.mine = mine
            if self.settle_s > 0:
                self._stop.wait(self.settle_s)
            self._confirm()
            return mine

    def adopt(self, local: Local) -> None:
        """An engine takes up the claim its folder names (written by `resume`, or by
        an earlier engine here): held if it is still the holder's, else superseded."""
        with self._lock:
            self.holder = local.holder
            claims = self.claims()
            found = next((c for c in claims if c.holder == local.holder
                          and c.fence == local.fence), None)
            if found is None:  # never stored (or removed): taken anew, if free
                self.acquire(force=False)
                return
            self.mine = Claim(local.fence, local.holder, _host_of(local.holder),
                              self.clock(), self.ttl_s)
            self._judge(claims)
            if self.state is LeaseState.HELD:
                self._put(self.mine)  # renewed at once: the engine took it up

    def establish(self) -> None:
        """The engine's start: its folder's claim taken up, or a new one when it has
        none; a live holder elsewhere is a supersession (this engine never drives)."""
        state_dir = self.state_dir
        local = Local.read(state_dir) if state_dir is not None else None
        try:
            if local is not None:
                self.adopt(local)
            else:
                self.acquire(force=False)
        except LeaseHeld as exc:
            with self._lock:
                self.state, self.winner = LeaseState.SUPERSEDED, exc.holder
            return
        except Superseded:
            return
        if state_dir is not None and self.mine is not None:
            Local(self.mine.holder, self.mine.fence).write(state_dir)

    # -- holding it ------------------------------------------------------------------------
    def _judge(self, claims: list[Claim]) -> None:
        top = winner(claims)
        mine = self.mine
        if mine is None or top is None or (top.fence, top.holder) == (mine.fence, mine.holder):
            self.state = LeaseState.HELD if mine is not None else self.state
            return
        if top.rank < mine.rank:
            self.state, self.winner = LeaseState.SUPERSEDED, top

    def _confirm(self) -> None:
        self._judge(self.claims())
        if self.state is LeaseState.SUPERSEDED:
            raise Superseded(self.winner, self.mine)

    def ensure(self) -> None:
        """Before any write to the store: Superseded once another box holds the
        campaign (then for good); a store that fails raises its own error."""
        with self._lock:
            if self.state is LeaseState.SUPERSEDED:
                raise Superseded(self.winner, self.mine)
            if self.mine is None:
                self.establish()
                if self.state is LeaseState.SUPERSEDED:
                    raise Superseded(self.winner, self.mine)
                return
            self._confirm()

    @property
    def superseded(self) -> Claim | None:
        """The claim that took the campaign from this one, None while it holds."""
        return self.winner if self.state is LeaseState.SUPERSEDED else None

    def renew(self) -> None:
        """Check, then rewrite this claim with the time (its heartbeat)."""
        with self._lock:
            self.ensure()
            self.mine = Claim(self.mine.fence, self.mine.holder, self.mine.host,
                              self.clock(), self.ttl_s)
            self._put(self.mine)

    def release(self) -> None:
        """The engine stops driving: its claim says so, a resume needs no --force.
        Never written once superseded (nor when the store cannot say)."""
        self._stop.set()
        with self._lock:
            if self.mine is None or self.state is not LeaseState.HELD:
                return
            try:
                self._confirm()
                self._put(Claim(self.mine.fence, self.mine.holder, self.mine.host,
                                self.clock(), self.ttl_s, released=True))
            except Exception:  # noqa: BLE001 - superseded or down: left to go stale
                pass

    def withdraw(self) -> None:
        """A claimant that never drove (a resume refused after taking its claim) removes
        its own claim: the holder before it, still alive under `--force`, goes on."""
        self._stop.set()
        with self._lock:
            if self.mine is None:
                return
            try:
                self.store.fs.rm(f"{self.dir}/{self.mine.name}")
            except Exception:  # noqa: BLE001 - down: it goes stale unrenewed
                pass
            self.mine, self.state = None, LeaseState.UNKNOWN

    def start_renewing(self, every_s: float = RENEW_S) -> "Lease":
        """The heartbeat, on a thread of its own (a stalled mirror never stalls it); the
        engine's loop reads `superseded` on each pass."""
        def run() -> None:
            while not self._stop.wait(every_s):
                try:
                    self.renew()
                except Superseded:
                    return
                except Exception:  # noqa: BLE001 - the store down: tried again
                    continue

        self._thread = threading.Thread(target=run, name="itera-lease", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()


HOLD_WAIT_S = 10.0  # what an engine's start waits for the store's word on its claim


def engine_lease(store, part: str, state_dir: Path) -> Lease:
    """An engine's lease: no settle wait on its claim (the race of two boxes taking one
    campaign is `resume`'s, settled there); the mirror's first write establishes it."""
    return Lease(store, part, state_dir=state_dir, settle_s=0.0)


def hold(lease: Lease, wait_s: float = HOLD_WAIT_S) -> Lease:
    """The engine's claim confirmed before its first tick (bounded: a store that does
    not answer leaves it to the first write and the heartbeat), then renewed."""
    def first() -> None:
        try:
            lease.ensure()
        except Exception:  # noqa: BLE001 - superseded: its state says so; down: later
            pass

    asker = threading.Thread(target=first, name="itera-lease-start", daemon=True)
    asker.start()
    asker.join(wait_s)
    return lease.start_renewing()


def take_over(store, part: str, force: bool = False) -> tuple[Lease, bool]:
    """`resume`'s claim on the campaign, before it fetches anything (the old engine's
    writes after it are fenced off): (the lease, whether any claim was there before,
    i.e. whether the store's writers hold leases at all). Refused in one sentence
    (`LeaseRefused`) when a live holder keeps it and `force` is not given, or when a
    resume started at the same moment won it."""
    lease = Lease(store, part)
    before = bool(lease.claims())
    try:
        lease.acquire(force=force)
    except LeaseHeld as exc:
        raise LeaseRefused(str(exc)) from None
    except Superseded as exc:
        w = exc.winner
        raise LeaseRefused(
            f"box {w.host} (holder {w.holder}) took this campaign at the same moment "
            f"(lease fence {w.fence}): it drives the campaign, nothing was started "
            "here") from None
    return lease, before


def keep_here(lease: Lease, state_dir: Path) -> None:
    """The claim handed to the engine `resume` starts in `state_dir` (lease.json)."""
    Local(lease.holder, lease.mine.fence).write(state_dir)
