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
"""

from __future__ import annotations

import hashlib
import threading
import time
from pathlib import Path

from .index import CampaignId, StoreIndex

CHECK_WAIT_S = 10.0  # what `check` and a start wait for the store's answer, at most


def ask_bounded(ask, wait_s: float, name: str):
    """`ask()`'s answer, asked on its own thread so that a store that hangs costs at
    most `wait_s`; None when it fails (down, refused, untrusted: not a sure failure)
    or does not answer in time. `check` and a start ask the store this way."""
    found: list = []

    def run() -> None:
        try:
            found.append(ask())
        except Exception:
            pass

    asker = threading.Thread(target=run, name=name, daemon=True)
    asker.start()
    asker.join(wait_s)
    return found[0] if found else None


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


def store_claim_refusal(plan, wait_s: float = CHECK_WAIT_S) -> list[str]:
    """The refusal line when this plan's `[store]` part holds another campaign; [] when
    it is free or this campaign's, and when the store cannot say within `wait_s`
    (unreachable, an index that cannot be read: the mirror says so, and never writes
    over another campaign's part either)."""
    if getattr(plan, "store", None) is None:
        return []
    from .fetch import read_index
    from .layout import Layout, part_of
    from .url import open_store

    def ask():
        store = open_store(plan.store)
        part = part_of(plan)
        return store, part, read_index(store, part)

    found = ask_bounded(ask, wait_s, "itera-store-claim")
    if found is None:
        return []
    store, part, index = found
    mine = local_campaign(plan.state_dir)
    if not held_by_another(index, mine, Path(plan.state_dir) / "ledger.jsonl"):
        return []
    return [refusal_line(store.label, store.url.url_of(Layout(part).part), index)]


def refuse_foreign_store(plan) -> None:
    """PlanError (exit 2 at the command line) when this plan's store prefix holds
    another campaign: before a campaign is frozen or launched. One that started
    already is not asked again (as `campaign.preflight.start_refusal`: a restart
    never waits on the store; its mirror still never writes another's part)."""
    from ..campaign.validate import PlanError

    if (Path(plan.state_dir) / "ledger.jsonl").exists():
        return
    lines = store_claim_refusal(plan)
    if lines:
        raise PlanError(lines)
