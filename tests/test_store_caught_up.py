""""Caught up" is said by a pass of the mirror begun after the question, never by the
status an earlier pass left (tui/store/mirror.py, `Mirror.wait_caught_up`).

A box going down asks the mirror whether the store holds what the ledger says
(`CampaignSession.flush_store`: the checkpoints the next box resumes from). The status
it reads is published at the end of each pass: read while a pass is still storing, or
before the thread has taken what the engine just handed over, it is the word of the
pass before, and said "caught up" while checkpoint folders were still being stored
(seen once, test_store_folders on a busy box)."""

from __future__ import annotations

import threading

from storekit import file_store_plan
from tui.engine import Engine
from tui.engine.ledger.events import WarningEvent
from tui.store import open_store
from tui.store.mirror import Mirror


def test_a_status_published_before_the_question_is_no_answer(tmp_path):
    plan = file_store_plan(tmp_path)
    engine = Engine(plan, poll_interval=0.05).open()
    mirror = Mirror(plan, engine, store=open_store(plan.store), backoff_s=0.01,
                    push_every_s=0.05).start()
    gate = threading.Event()
    try:
        assert mirror.wait_caught_up(30), mirror.status()
        assert mirror.status().caught_up  # what the last pass said, and still says
        take = mirror._take_intake

        def held():  # the next pass is slow to begin its work: a busy box
            gate.wait(30)
            return take()

        mirror._take_intake = held
        engine.journal.record(WarningEvent(message="a line the store does not hold yet"))
        grown = (plan.state_dir / "ledger.jsonl").stat().st_size
        # the last pass's status still says caught up; the ledger has grown since
        assert mirror.status().caught_up
        assert not mirror.wait_caught_up(0.5)
        gate.set()
        assert mirror.wait_caught_up(30), mirror.status()
        assert mirror.status().ledger_stored >= grown  # the new line is stored
    finally:
        gate.set()
        mirror.close()
        engine.close()
