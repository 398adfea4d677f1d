"""One box drives a campaign at a time (issue 45, item 1): the store's lease rules,
in-process against a real file:// store (no process started). Each claimant writes
its own claim object; the highest fence holds, a tie goes to the smaller holder name,
a claim not renewed for its TTL is stale, a released one is free, and a claimant that
a higher claim superseded never writes the store again."""

from __future__ import annotations

import threading
import time

import pytest

from enginekit import wait_for
from tui.store import open_store
from tui.store.lease import (Claim, Lease, LeaseHeld, LeaseRefused, Local, Superseded,
                             engine_lease, keep_here, take_over, winner)


class Clock:
    def __init__(self, t: float = 1000.0):
        self.t = t

    def __call__(self) -> float:
        return self.t


def store_at(tmp_path):
    return open_store(f"file://{tmp_path}/store")


def claim_names(tmp_path) -> list[str]:
    d = tmp_path / "store" / "lot1" / "lease"
    return sorted(p.name for p in d.iterdir()) if d.is_dir() else []


def test_each_claimant_writes_its_own_claim_and_the_highest_fence_holds(tmp_path):
    store, clock = store_at(tmp_path), Clock()
    a = Lease(store, "lot1", "boxa-0001", clock=clock, settle_s=0)
    b = Lease(store, "lot1", "boxb-0002", clock=clock, settle_s=0)
    assert a.acquire().fence == 1
    a.ensure()  # holds
    with pytest.raises(LeaseHeld) as held:  # a live holder: not taken without force
        b.acquire()
    said = str(held.value)
    assert "box boxa (holder boxa-0001) holds this campaign" in said and "--force" in said
    assert b.acquire(force=True).fence == 2  # --force: the next fence
    assert claim_names(tmp_path) == ["00000001-boxa-0001.json", "00000002-boxb-0002.json"]
    before = (tmp_path / "store/lot1/lease/00000001-boxa-0001.json").read_bytes()
    with pytest.raises(Superseded) as sup:
        a.ensure()
    assert "superseded by box boxb" in str(sup.value) and "fence 2" in str(sup.value)
    assert a.superseded.holder == "boxb-0002"
    with pytest.raises(Superseded):  # for good: never renewed again
        a.renew()
    a.release()  # superseded: its claim is left as it was, never written
    assert (tmp_path / "store/lot1/lease/00000001-boxa-0001.json").read_bytes() == before
    b.ensure()


def test_a_tie_goes_to_the_smaller_holder_name_on_both_sides(tmp_path):
    """Two resumes at the same moment: both list before either writes, so both claim
    fence 1; read back after the settle time, both pick the same holder."""
    store = store_at(tmp_path)
    both_listed = threading.Barrier(2, timeout=30)

    class Racing(Lease):
        def _put(self, claim):
            if self.mine is None:  # the first put: only once the rival has listed too
                both_listed.wait()
            super()._put(claim)

    racers = [Racing(store, "lot1", name, settle_s=0.5) for name in ("boxz-9", "boxa-1")]
    results: dict[str, object] = {}

    def go(lease):
        try:
            results[lease.holder] = lease.acquire().fence
        except Superseded as exc:
            results[lease.holder] = exc.winner.holder

    threads = [threading.Thread(target=go, args=(r,)) for r in racers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert results == {"boxa-1": 1, "boxz-9": "boxa-1"}
    assert winner([Claim(1, "boxz-9"), Claim(1, "boxa-1"), Claim(0, "a")]).holder == "boxa-1"
    assert winner([Claim(2, "boxz-9"), Claim(1, "boxa-1")]).holder == "boxz-9"


def test_a_renewed_claim_stays_live_a_stale_or_released_one_is_free(tmp_path):
    store, clock = store_at(tmp_path), Clock()
    a = Lease(store, "lot1", "boxa-1", clock=clock, ttl_s=60, settle_s=0)
    a.acquire()
    clock.t += 50
    a.renew()  # the heartbeat: renewed at +50
    clock.t += 55  # 105 s after the claim, 55 s after the renewal: still live
    with pytest.raises(LeaseHeld) as held:
        Lease(store, "lot1", "boxb-2", clock=clock, settle_s=0).acquire()
    assert "renewed 55 s ago" in str(held.value)
    clock.t += 10  # 65 s without a renewal: its box is gone or cut off
    b = Lease(store, "lot1", "boxb-2", clock=clock, settle_s=0)
    assert b.acquire().fence == 2
    b.release()  # an engine that stopped: the next one needs no --force
    c = Lease(store, "lot1", "boxc-3", clock=clock, settle_s=0)
    assert c.acquire().fence == 3
    with pytest.raises(Superseded):  # the stale holder, back from its partition
        a.ensure()


def test_resume_hands_its_claim_to_the_engine_and_a_refused_resume_withdraws_it(tmp_path):
    store = store_at(tmp_path)
    old_dir, new_dir = tmp_path / "old" / ".itera", tmp_path / "new" / ".itera"
    old_dir.mkdir(parents=True)
    new_dir.mkdir(parents=True)
    old = engine_lease(store, "lot1", old_dir)
    old.ensure()  # a fresh campaign's engine: fence 1, kept in its folder
    assert Local.read(old_dir).fence == 1
    with pytest.raises(LeaseRefused) as refused:  # the old engine lives: refused
        take_over(store, "lot1", force=False)
    assert "holds this campaign" in str(refused.value)
    lease, before = take_over(store, "lot1", force=True)
    assert before and lease.mine.fence == 2
    lease.withdraw()  # refused later (a damaged object): as if never taken
    old.ensure()  # the old engine still holds
    lease, _ = take_over(store, "lot1", force=True)
    keep_here(lease, new_dir)
    new = engine_lease(store, "lot1", new_dir)  # the engine resume starts, in its folder
    new.ensure()
    assert new.holder == lease.holder and new.mine.fence == 2  # the withdrawn one left no trace
    with pytest.raises(Superseded):
        old.ensure()
    # the old box's engine restarted (its supervisor): its folder's claim is not the
    # holder's, so it never drives
    again = engine_lease(store, "lot1", old_dir)
    with pytest.raises(Superseded):
        again.ensure()
    assert again.superseded.holder == lease.holder


def test_a_superseded_mirror_writes_nothing_more_to_the_store(tmp_path):
    from storekit import file_store_plan
    from tui.engine import Engine
    from tui.engine.ledger.events import WarningEvent
    from tui.store.mirror import Mirror

    plan = file_store_plan(tmp_path)
    engine = Engine(plan, poll_interval=0.05).open()
    store = store_at(tmp_path)
    lease = engine_lease(store, "lot1", plan.state_dir)
    mirror = Mirror(plan, engine, store=store, backoff_s=0.01, push_every_s=0.05, lease=lease)
    mirror.start()
    stored = lambda: sorted(p.relative_to(tmp_path / "store")  # noqa: E731
                            for p in (tmp_path / "store").rglob("*") if p.is_file()
                            and "lease" not in p.parts)
    try:
        assert mirror.wait_caught_up(30), mirror.status()  # the first push
        take_over(store, "lot1", force=True)  # another box takes the campaign over
        before = {p: (tmp_path / "store" / p).read_bytes() for p in stored()}
        engine.journal.record(WarningEvent(message="a line the old box writes after"))
        # its next write checks, and stops
        wait_for(lambda: lease.superseded, 30, what="the mirror to find it superseded")
        time.sleep(0.3)  # further passes (push_every_s 0.05) would write here
        assert {p: (tmp_path / "store" / p).read_bytes() for p in stored()} == before
        assert not mirror.wait_caught_up(0.5)
        assert "superseded by box" in (mirror.status().problem or "")
    finally:
        mirror.close()
        engine.close()


def test_a_superseded_engine_delivers_no_bundle(tmp_path):
    from tui.store.deliver import deliver_bundle

    store = store_at(tmp_path)
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / "report.md").write_text("a report\n")
    (bundle / "manifest.json").write_text("{}\n")
    old = Lease(store, "lot1", "boxa-1", settle_s=0)
    old.acquire()
    Lease(store, "lot1", "boxb-2", settle_s=0).acquire(force=True)
    with pytest.raises(Superseded):
        deliver_bundle(store, "lot1/bundle", bundle, fence=old.ensure)
    assert not (tmp_path / "store" / "lot1" / "bundle").exists()


def test_an_engine_that_another_box_holds_the_campaign_from_launches_nothing(tmp_path):
    """The old box's engine started again (its supervisor, a reboot) while a new box
    holds a live claim: superseded before its first tick, it launches no run (a
    process here would fail this test: it is not marked slow), and says why."""
    from storekit import file_store_plan
    from tui.engine import Engine
    from tui.engine.ledger.events import BoxGoingDown, RunLaunched, WarningEvent
    from tui.service.server import EngineService, ServeEnd
    from tui.session import CampaignSession

    plan = file_store_plan(tmp_path)
    Lease(store_at(tmp_path), "lot1", "boxb-2", settle_s=0).acquire()  # the new box
    lines: list[str] = []
    session = CampaignSession(plan, Engine(plan, poll_interval=0.05), poll_interval=0.05)
    session.open()
    try:
        service = EngineService(session, tmp_path / "s.sock", poll_interval=0.05,
                                on_line=lines.append)
        ended: list = []
        serving = threading.Thread(target=lambda: ended.append(service.serve()))
        serving.start()
        serving.join(60)  # a driving engine never ends by itself: stopped, then failed
        if serving.is_alive():
            service.request_stop()
            serving.join(60)
        assert ended == [ServeEnd.SUPERSEDED]
        events = session.engine.journal.recent(1000)
    finally:
        session.close()
    assert not [e for e in events if isinstance(e, RunLaunched)]
    (down,) = [e for e in events if isinstance(e, BoxGoingDown)]
    assert down.signal == "superseded" and "superseded by box boxb (holder boxb-2" in down.notice
    assert any(isinstance(e, WarningEvent) and "superseded by box boxb" in e.message
               for e in events)
    assert any("superseded by box boxb" in line for line in lines)
