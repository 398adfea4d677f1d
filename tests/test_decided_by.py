"""Who answered the decision point is said as such: the room, `itera-tui decide`, the
`--decide` flag, the plan, the deadline. Both faces a person uses wrote "user", read
"by a person"; the engine now knows each client by the name it gave at hello."""

from __future__ import annotations

import pytest

from enginekit import write_plan
from servicekit import end_engine, wait_until
from test_engine_decisions import PILOT, three_variants
from tui.campaign import load_plan
from tui.engine import read_ledger
from tui.engine.decision.answer import WRAPUP
from tui.engine.ledger.events import DecidedBy, DecisionTaken
from tui.engine.ledger.lines import describe
from tui.service.starter import connect


def test_each_face_that_may_decide_is_named_by_what_it_is():
    assert DecidedBy.of_client("room") is DecidedBy.ROOM
    assert DecidedBy.of_client("cli") is DecidedBy.COMMAND
    assert DecidedBy.of_client("bridge") is DecidedBy.PERSON  # a face that says nothing more
    assert DecidedBy("cli") is DecidedBy.FLAG and DecidedBy("user") is DecidedBy.PERSON
    line = describe(DecisionTaken(seq=5, t=1.7e9, decision="continue", by=DecidedBy.ROOM))
    assert line == "decision: continue (by a person, in the room)"


@pytest.mark.slow
def test_a_decision_sent_with_itera_tui_decide_is_recorded_as_the_command_s(tmp_path):
    path = write_plan(tmp_path, three_variants(), pilot=PILOT)
    plan = load_plan(path)
    room = cli = None
    try:
        room = connect(plan, start=True, name="room")
        wait_until(lambda: room.step().state.decision_pending is not None, 180,
                   "the decision point")
        cli = connect(plan, start=False, name="cli")
        answered = cli.decide(WRAPUP)
        assert answered.ok, answered.message
        ledger = plan.state_dir / "ledger.jsonl"
        wait_until(lambda: any(isinstance(e, DecisionTaken) for e in read_ledger(ledger)), 60,
                   "the decision in the ledger")
        (taken,) = [e for e in read_ledger(ledger) if isinstance(e, DecisionTaken)]
        assert taken.by is DecidedBy.COMMAND
        assert describe(taken).endswith("(by a person, with `itera-tui decide`)")
    finally:
        for client in (room, cli):
            if client is not None:
                client.close()
        end_engine(tmp_path)
