"""The store's ledger is the record: only ever extended, and a ledger cut on the box
is recovered from it.

A ledger cut on this box (a full disk, a file truncated by hand, a disk put back
from an old snapshot: 18,967 of its 37,900 bytes) was pushed over the intact copy
in the store, and the engine went on from half the history (redoing runs and the
wrap-up). Two guards now:

- **At start** (`recover_before_open`, which the engine calls once it holds the
  campaign's lock and before it reads the ledger): when this box itself says the
  store holds more than the ledger here (the ledger ends in a torn line, or the
  mirror's last status, `.itera/store.json`, says more bytes were stored than
  the ledger holds, or that it kept the store's ledger over this one), the
  store's ledger is read (checked by length and sha256; the engine then checks
  each line's CRC) within `claim.CHECK_WAIT_S`. A ledger here that is a strict
  prefix of the store's was cut: the store's is laid back (the cut one kept
  beside it as `ledger.jsonl.cut-<time>`) and the campaign goes on from its
  whole history, said in a warning. One that diverges from the store's refuses
  the start, naming both lengths and the command that continues from the store.
  Without that local sign a restart never waits on the store.
- **In the mirror** (`fit_bytes`, `kept_words`): a ledger here that is not an
  extension of the stored one (shorter, or different within what is stored) is
  never written over it: the mirror writes nothing to the part (nor does the
  wrap-up deliver a bundle there) and says so once, with the command that
  continues from the store's history (`resume_hint`); its status says so, the
  sign the next start reads.
"""

from __future__ import annotations

import os
import shutil
import time
from enum import Enum
from pathlib import Path

from ..engine.errors import EngineError
from .claim import CHECK_WAIT_S, ask_bounded


class Fit(Enum):
    """How the ledger here stands to the store's."""

    EXTENDS = "extends"  # the store's is a prefix of this one (or equal): pushed on
    SHORTER = "shorter"  # this one is a strict prefix of the store's: it was cut
    DIVERGES = "diverges"  # they differ within both: two histories


def fit_bytes(local: bytes, stored: bytes) -> Fit:
    """The ledger here (its whole lines; a torn tail is the damage) against the store's."""
    whole = local[:local.rfind(b"\n") + 1]
    if whole.startswith(stored):
        return Fit.EXTENDS
    if stored.startswith(whole):
        return Fit.SHORTER
    return Fit.DIVERGES


def resume_hint(url: str) -> str:
    """The command that continues the campaign from the store's history."""
    return (f"continue from the store in a fresh folder: `itera-tui resume {url} DIR "
            f"--lot 'gpu = \"…\", days = …, price_usd = …' --force`")


def kept_words(url: str, local_bytes: int, stored_bytes: int, how: Fit) -> str:
    """What the mirror says when it keeps the store's ledger over this box's."""
    what = (f"is shorter than the store's ({local_bytes:,} bytes here, {stored_bytes:,} "
            "there)" if how is Fit.SHORTER else
            f"differs from the store's within its first {stored_bytes:,} bytes")
    return (f"the ledger on this box {what}: the store's copy is the record and is kept, "
            f"and nothing more of this campaign is written to {url}; stop this engine "
            f"(`itera-tui engine stop`) and {resume_hint(url)}")


def _local_sign(state_dir: Path, ledger: Path) -> bool:
    """Whether this box itself says its ledger lost what the store holds."""
    from .status import read_status

    try:
        size = ledger.stat().st_size
        with open(ledger, "rb") as fh:
            fh.seek(max(0, size - 1))
            torn = size > 0 and fh.read(1) != b"\n"
    except OSError:
        return False
    status = read_status(state_dir)
    return torn or (status is not None and (status.kept or status.ledger_stored > size))


def recover_before_open(plan, share=None) -> list[str]:
    """Called with the campaign's lock held, before the ledger is read. Returns the
    warnings to record (a ledger laid back from the store); raises EngineError when the
    ledger here diverges from the store's (nothing is changed then)."""
    state_dir = Path(plan.state_dir)
    ledger = state_dir / "ledger.jsonl"
    if getattr(plan, "store", None) is None or not _local_sign(state_dir, ledger):
        return []

    def ask():
        from .fetch import read_index, read_ledger
        from .layout import Layout, part_of
        from .url import open_store

        store = open_store(plan.store)
        part = part_of(plan, share)  # this box's part, as its mirror writes it
        index = read_index(store, part)
        if index is None or not index.ledger_bytes:
            return None
        return store.url.url_of(Layout(part).part), read_ledger(store, part, index)

    # down, refused, untrusted: the mirror says so, and never writes over it either
    found = ask_bounded(ask, CHECK_WAIT_S, "itera-store-ledger")
    if found is None:
        return []
    url, stored = found
    try:
        return _lay_back(ledger, stored, url)
    except OSError as exc:
        raise EngineError(f"the store's ledger ({url}) could not be laid back over the "
                          f"cut one here: {exc.strerror or exc}; nothing was started") from None


def _lay_back(ledger: Path, stored: bytes, url: str) -> list[str]:
    """The store's ledger over a cut one here (kept beside it), or the refusal."""
    local = ledger.read_bytes()
    how = fit_bytes(local, stored)
    if how is Fit.EXTENDS:
        return []
    if how is Fit.DIVERGES:
        raise EngineError(
            f"the ledger on this box ({len(local):,} bytes) differs from the one in the "
            f"store ({len(stored):,} bytes, {url}): two histories of this campaign, nothing "
            f"was changed; to go on from the store's, {resume_hint(url)}")
    kept = ledger.with_name(f"{ledger.name}.cut-{int(time.time())}")
    tmp = ledger.with_name(ledger.name + ".from-store")
    with open(tmp, "wb") as fh:
        fh.write(stored)
        fh.flush()
        os.fsync(fh.fileno())
    if not kept.exists():
        shutil.copyfile(ledger, kept)
    os.replace(tmp, ledger)
    return [f"the ledger on this box was cut ({len(local):,} bytes where the store holds "
            f"{len(stored):,}, {url}): the store's copy was laid back and the campaign goes "
            f"on from its whole history (the cut one is kept as .itera/{kept.name})"]
