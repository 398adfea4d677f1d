"""A store prefix belongs to one campaign (issue 45 item 2d): a second campaign with
the same `[store] url` (after `itera-tui new`) is refused at `check` and at start,
exit 2, in words that say to choose another prefix, and its mirror never writes over
the first one's copy; the same campaign started again goes on. In-process, with a
file:// store (no run is launched: the engines open and close)."""

from __future__ import annotations

import shutil

from enginekit import control_only, printer_cmd, wait_for, write_plan
from tui import cli
from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.ledger.events import StoreDown
from tui.service import headless
from tui.store import ledger_segments, open_store, read_index
from tui.store.mirror import Mirror


def mirrored(plan) -> list:
    """Open the campaign's engine with its mirror, let the mirror settle, close: the
    store_down events said meanwhile."""
    engine = Engine(plan, poll_interval=0.05).open()
    said: list = []
    engine.subscribe(lambda ev: said.append(ev) if isinstance(ev, StoreDown) else None)
    mirror = Mirror(plan, engine, store=open_store(plan.store), backoff_s=0.01,
                    push_every_s=0.05).start()
    try:
        wait_for(lambda: said or mirror.wait_caught_up(1.0), what="the mirror settled")
    finally:
        mirror.close()
        engine.close()
    return said


def test_a_second_campaign_on_a_store_prefix_is_refused_and_never_writes_there(
        tmp_path, capsys, monkeypatch):
    root = tmp_path / "camp"
    root.mkdir()
    url = f"file://{tmp_path}/store"
    path = write_plan(root, control_only(printer_cmd()), extra=f'\n[store]\nurl = "{url}"\n')
    plan = load_plan(path)
    store = open_store(url)

    assert mirrored(plan) == []  # campaign 1 stored its ledger and plan
    first = read_index(store, "lot1")
    first_ranges = ledger_segments(store, "lot1")
    assert first.ledger_bytes and first_ranges

    assert cli.main(["check", str(path)]) != 2  # the same campaign: accepted
    assert "choose another prefix" not in capsys.readouterr().err
    assert mirrored(plan) == []  # and started again, it goes on
    assert read_index(store, "lot1").ledger_bytes >= first.ledger_bytes
    first = read_index(store, "lot1")
    first_ranges = ledger_segments(store, "lot1")

    shutil.move(str(root / ".itera"), str(tmp_path / "archived"))  # as `itera-tui new`
    assert cli.main(["check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"{url}/lot1 holds another campaign (started " in err, err
    assert "choose another prefix in [store] url" in err, err

    started = []  # at start: refused before anything is frozen or launched
    monkeypatch.setattr(headless, "run_headless", lambda *a, **k: started.append(a) or 0)
    assert cli.main(["run", "--headless", str(path)]) == 2
    assert not started and not (root / ".itera/ledger.jsonl").exists()
    assert "choose another prefix" in capsys.readouterr().err

    said = mirrored(load_plan(path))  # a start that got past both: its mirror refuses
    assert said and "choose another prefix" in said[0].message, said
    assert read_index(store, "lot1") == first  # campaign 1's copy is untouched
    assert ledger_segments(store, "lot1") == first_ranges
