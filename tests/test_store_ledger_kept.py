"""The store's ledger is the record (tui/store/ledger_guard.py): a ledger cut on the box
never shortens the store's; a restart that can tell its ledger was cut lays the store's
back, one that diverges from it refuses to start, and a mirror that finds the ledger
here is not the store's writes nothing and says what to run."""

from __future__ import annotations

import pytest

from fakeprocs import SelfPlayingProcesses
from fakewrapup import FakeWrapup
from enginekit import control_only, printer_cmd, step_to_the_end, wait_for, write_plan



def test_a_ledger_cut_on_the_box_never_shortens_the_stores_and_is_recovered(tmp_path,
                                                                           monkeypatch):
    from tui.campaign import load_plan
    from tui.engine import Engine, EngineError
    from tui.engine.ledger.file import read_ledger_report
    from tui.session import CampaignSession
    from tui.store import mirror, open_store, read_ledger

    monkeypatch.setattr(mirror, "LOG_DELAY_S", 0.2)  # a run's logs: not 5 s after its exit

    root = tmp_path / "camp"
    root.mkdir()
    url = f"file://{tmp_path}/store"
    path = write_plan(root, control_only(printer_cmd("--steps", "5")),
                      extra=f'\n[store]\nurl = "{url}"\n')
    plan = load_plan(path)
    ledger = root / ".itera" / "ledger.jsonl"
    store = open_store(url)

    def session():  # the runs and the wrap-up's helpers: fakes; the store: real files
        return CampaignSession(plan, Engine(plan, poll_interval=0.05,
                                            processes=SelfPlayingProcesses()),
                               poll_interval=0.05, wrapup_helpers=FakeWrapup())

    def warnings() -> list[str]:
        return [getattr(ev, "message", "") for ev in read_ledger_report(ledger).events
                if ev.KIND == "warning"]

    first = session().open()
    try:
        step_to_the_end(first)
        assert first.mirror.wait_caught_up(60), first.mirror.status()
    finally:
        first.close()
    stored = read_ledger(store, "lot1")
    full = ledger.read_bytes()
    assert len(stored) > 2000 and full.startswith(stored)

    # 1. cut at a line, and nothing here says so (no torn line, no mirror status): the
    # engine opens on the shorter history, but its mirror never writes over the store's
    index_bytes = store.fs.cat(store.path("lot1/index.json"))
    lines = full.splitlines(keepends=True)
    ledger.write_bytes(b"".join(lines[:len(lines) // 2]))
    (root / ".itera" / "store.json").unlink()
    second = session().open()
    try:
        def first_pass():  # the mirror compared the two ledgers (and pushed, or not)
            second.step()
            st = second.mirror.status()
            return getattr(st, "kept", False) or st.ledger_stored > 0

        wait_for(first_pass, 60, "the mirror's first pass")
        assert read_ledger(store, "lot1") == stored  # byte-equal: the store's is the record

        def kept_said():
            second.step()
            return [w for w in warnings() if "the store's copy is the record" in w]

        said = wait_for(kept_said, 60, "the mirror's warning")
        assert "itera-tui resume" in said[0] and "--force" in said[0], said
        assert second.mirror.status().kept
        assert "NOTHING written" in second.mirror.status().text()
        step_to_the_end(second)
        done = second.wrapup()  # nor is a bundle delivered over the store's copy
        assert any("not delivered: the store keeps its own ledger" in line
                   for line in done.lines), done.lines
    finally:
        second.close()
    assert read_ledger(store, "lot1") == stored  # byte-equal: the store's is the record
    assert store.fs.cat(store.path("lot1/index.json")) == index_bytes  # and its index
    assert not store.fs.exists(store.path("lot1/bundle"))

    # 2. started again: the mirror's status said it kept the store's ledger, which the
    # one here diverges from (the lines the second engine wrote): the start is refused,
    # nothing changed
    diverged = ledger.read_bytes()
    with pytest.raises(EngineError, match="two histories") as refused:
        session().open()
    assert "itera-tui resume" in str(refused.value)
    assert ledger.read_bytes() == diverged and read_ledger(store, "lot1") == stored

    # 3. cut at half, mid-line (the case: 18,967 of 37,900 bytes): the store's
    # whole ledger is laid back and the campaign goes on from its whole history
    ledger.write_bytes(full[:len(full) // 2])
    third = session().open()
    try:
        assert third.engine.finished  # the whole history: nothing run again
        third.step()
        assert third.mirror.wait_caught_up(60), third.mirror.status()
    finally:
        third.close()
    assert any("the store's copy was laid back" in w for w in warnings()), warnings()
    assert ledger.read_bytes().startswith(stored)
    after = read_ledger(store, "lot1")
    assert after.startswith(stored) and len(after) > len(stored)
    assert list((root / ".itera").glob("ledger.jsonl.cut-*"))
