"""A store prefix belongs to one campaign.

Each part's `index.json` names its campaign (`CampaignId`: the `campaign_started`
time and the frozen plan's sha256). A second campaign given the same `[store] url`
(after `itera-tui new`, or a copied campaign.toml) would delete the first one's
ledger ranges, overwrite its bundle and list its checkpoints as its own; so it is
refused at `check` and before it starts (exit 2, in words that say to choose
another prefix), and the mirror never writes a part another campaign holds. The
same campaign started again, or continued on a new box (`resume`: its ledger is
the store's), has the same identity and goes on.

An index from before identities is this campaign's only when its stored ledger is
a prefix of the local one (an empty part belongs to nobody yet).

A store the campaign cannot write to (no such bucket or folder, an endpoint that
refuses or does not answer within CHECK_WAIT_S, credentials missing or refused) is
refused the same way, before anything is frozen or launched, in one sentence
(`url.store_failure`) naming what to create or set: a campaign that would store
nothing while every face says "off-box" is worse than none. Unless the person says
to go on without it (`--without-store` on `run` or `engine start`): that choice is
kept as `.itera/without-store`, and the session then starts no mirror.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.moves import WITHOUT_STORE_FILE  # in .itera/: started without the store
from .index import CampaignId, StoreIndex

CHECK_WAIT_S = 10.0  # what `check` and a start wait for the store's answer, at most
PROBE_DATA = b"itera-tui: can this store be written?\n"


@dataclass(frozen=True)
class Asked:
    """What a bounded ask came to: its answer, or what it raised, or neither (it did
    not answer within the wait)."""

    answer: Any = None
    error: BaseException | None = None
    answered: bool = False


def ask_within(ask, wait_s: float, name: str) -> Asked:
    """`ask()` on its own thread, so that a store that hangs costs at most `wait_s`."""
    found: list[Asked] = []

    def run() -> None:
        try:
            found.append(Asked(answer=ask(), answered=True))
        except Exception as exc:  # noqa: BLE001 - said by the caller, in words
            found.append(Asked(error=exc, answered=True))

    asker = threading.Thread(target=run, name=name, daemon=True)
    asker.start()
    asker.join(wait_s)
    return found[0] if found else Asked()


def ask_bounded(ask, wait_s: float, name: str):
    """`ask()`'s answer within `wait_s`; None when it fails (down, refused, untrusted:
    not a sure failure) or does not answer in time."""
    return ask_within(ask, wait_s, name).answer


def probe_write(store, part: str) -> None:
    """Write a small object under the part, then remove it: raises what the store
    raises. A file store's folder may be made, its parent must be there (a volume not
    mounted is not quietly replaced by a folder on the box's own disk)."""
    from .layout import Layout
    from .transfer import upload_bytes

    if store.url.protocol in ("file", "local"):
        parent = Path(store.url.root).parent
        if not parent.is_dir():
            raise FileNotFoundError(f"{parent} is not a folder here" if parent.exists()
                                    else f"{parent} does not exist")
    path = store.path(Layout(part).key(f".probe-{os.urandom(6).hex()}"))
    upload_bytes(store.fs, PROBE_DATA, path)
    try:
        store.fs.rm(path)
    except (FileNotFoundError, OSError):
        pass


def without_store(state_dir: Path) -> bool:
    """Whether this campaign was started without its `[store]` (`--without-store`)."""
    return (Path(state_dir) / WITHOUT_STORE_FILE).is_file()


def go_without_store(state_dir: Path) -> None:
    """The person said to go on without the store: kept for the engine (and its
    restarts), which then starts no mirror."""
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    (Path(state_dir) / WITHOUT_STORE_FILE).write_text(
        "started with --without-store: nothing of this campaign is copied off this box\n")


def local_campaign(state_dir: Path) -> CampaignId | None:
    """This folder's campaign, from its ledger (None: not started here)."""
    from ..engine.ledger.file import read_ledger_report
    from ..engine.ledger.state import replay

    path = Path(state_dir) / "ledger.jsonl"
    if not path.is_file():
        return None
    return CampaignId.of_state(replay(read_ledger_report(path).events))


def held_by_another(index: StoreIndex | None, mine: CampaignId | None,
                    ledger_path: Path) -> bool:
    """Whether the stored part `index` describes belongs to another campaign than
    `mine` (this folder's, None when it has not started)."""
    if index is None:
        return False
    if index.campaign is not None:
        return index.campaign != mine
    if not index.ledger_bytes and not index.objects:
        return False  # nothing stored: nobody's yet
    try:
        with open(ledger_path, "rb") as fh:
            prefix = fh.read(index.ledger_bytes)
    except OSError:
        return True
    return len(prefix) != index.ledger_bytes or \
        hashlib.sha256(prefix).hexdigest() != index.ledger_sha256


def refusal_line(store_label: str, url: str, index: StoreIndex) -> str:
    """The words `check`, a start and the mirror say for a prefix another campaign holds."""
    theirs = index.campaign
    who = "another campaign"
    if theirs is not None:
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(theirs.started))
        who += f" (started {started}" + (f", plan sha256 {theirs.plan_sha256[:12]}…"
                                        if theirs.plan_sha256 else "") + ")"
    return (f"store.url: {url} holds {who}; a store prefix belongs to one campaign, so "
            f"this one would destroy that copy: choose another prefix in [store] url "
            f"(e.g. {store_label}/<this campaign's name>)")


GO_WITHOUT = ("or go on with no off-box copy: `itera-tui run --without-store` (or "
              "`itera-tui engine start --without-store`)")


def store_refusal(plan, wait_s: float = CHECK_WAIT_S) -> list[str]:
    """The refusal line when this plan's `[store]` cannot be written (one sentence that
    says what to create or set), does not answer within `wait_s`, or its part holds
    another campaign; [] when it is free or this campaign's, or when the person said to
    go on without it."""
    if getattr(plan, "store", None) is None or without_store(plan.state_dir):
        return []
    from .fetch import read_index
    from .layout import Layout, part_of
    from .url import open_store, store_failure

    def ask():
        store = open_store(plan.store)
        part = part_of(plan)
        probe_write(store, part)
        return store, part, read_index(store, part)

    asked = ask_within(ask, wait_s, "itera-store-claim")
    if not asked.answered:
        return [f"store.url: {plan.store.url}: the store is not answering within "
                f"{wait_s:g} s: check [store] url and its endpoint, and that the store is "
                f"up; {GO_WITHOUT}"]
    if asked.error is not None:
        sentence = store_failure(plan.store.url, asked.error, plan.store.options_dict,
                                 writing=True)
        return [f"store.url: {sentence}; {GO_WITHOUT}"]
    store, part, index = asked.answer
    mine = local_campaign(plan.state_dir)
    if not held_by_another(index, mine, Path(plan.state_dir) / "ledger.jsonl"):
        return []
    return [refusal_line(store.label, store.url.url_of(Layout(part).part), index)]


def refuse_unusable_store(plan, go_without: bool = False) -> None:
    """PlanError (exit 2 at the command line) when this plan's store cannot be written
    or holds another campaign: before a campaign is frozen or launched. With
    `go_without` the campaign is started without it (kept: `without_store`). One that
    started already is not asked again (as `campaign.preflight.start_refusal`: a
    restart never waits on the store; its mirror still never writes another's part)."""
    from ..campaign.validate import PlanError

    if getattr(plan, "store", None) is None:
        return
    if go_without:
        go_without_store(plan.state_dir)
        return
    if (Path(plan.state_dir) / "ledger.jsonl").exists():
        return
    lines = store_refusal(plan)
    if lines:
        raise PlanError(lines)
