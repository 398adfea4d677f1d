"""The decision point as one object (tui/engine/decision/point.py), under a fake clock.

No run is started: a real ledger in a temporary folder, a plan with a pilot, and
the pilots' figures handed in as the engine would. What is asked, the deadline
and its default, the held "continue", and who answered, each said as such in
the ledger and in every view that shows it (the events panel, `status`, the
notices); and the one rule for whether a run can answer a checkpoint request.
"""

from __future__ import annotations

import json
import threading

import pytest

from enginekit import write_plan
from tui.campaign import load_plan
from tui.bundle.actual import compare
from tui.bundle.report import _planned_vs_actual
from tui.engine import EngineError, read_ledger
from tui.engine.checkpoints.answerable import (awaiting_first_record, can_checkpoint,
                                               checkpoint_refusal)
from tui.engine.decision.answer import CONTINUE, WRAPUP, Decision
from tui.engine.decision.point import DecisionPoint
from tui.engine.ledger.events import (DecidedBy, DecisionAsked, DecisionKind, DecisionTaken,
                                      VariantDropped, WarningEvent)
from tui.engine.ledger.journal import Journal
from tui.engine.ledger.lines import describe
from tui.engine.ledger.records import CheckpointAck
from tui.engine.ledger.state import RunState, replay
from tui.service.protocol import ActionKind, ProtocolError, action_message, encode, parse_request

VARIANTS = "".join(f"""
[[variant]]
id = "{vid}"
category = "{cat}"
command = ["true"]
minutes = 1
""" for vid, cat in (("control", "mandatory"), ("b", "useful"), ("c", "exploratory")))
ASK = '[pilot]\nsteps = 3\ndecide = "ask"\n'
DEADLINE = ASK + 'decide_after_minutes = 30\ndefault = "wrapup"\n'
CONTINUES = '[pilot]\nsteps = 3\ndecide = "continue"\n'
FIGURES = {"control": {"run": "control-pilot-1", "state": "completed", "problem": None},
           "b": {"run": "b-pilot-1", "state": "completed", "problem": None}}
CONTROL_FAILED = {"control": {"run": "control-pilot-1", "state": "failed",
                              "problem": "failed (exit 1)"}}


class FakeClock:
    def __init__(self, now: float = 1.7e9):
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def point(tmp_path):
    """A decision point on a fresh ledger: `point(pilot_toml, given=None)`."""
    journals = []

    def make(pilot: str, given: Decision | None = None):
        plan = load_plan(write_plan(tmp_path, VARIANTS, pilot=pilot))
        clock = FakeClock()
        journal = Journal(tmp_path / "ledger.jsonl", clock)
        journal.open()
        journals.append(journal)
        return DecisionPoint(plan, journal, clock, threading.RLock(), given), clock

    yield make


def recorded(dp: DecisionPoint, cls) -> list:
    return [e for e in dp.journal.recent(1000) if isinstance(e, cls)]


def test_past_the_deadline_the_default_is_taken_and_said_as_by_the_deadline(point):
    dp, clock = point(DEADLINE)
    dp.step(lambda: FIGURES)
    (asked,) = recorded(dp, DecisionAsked)
    assert asked.deadline == clock.now + 30 * 60 and asked.default == "wrapup"
    assert asked.auto is None and dp.pending is not None
    clock.now += 30 * 60 - 1
    dp.step(lambda: FIGURES)
    assert recorded(dp, DecisionTaken) == []  # a second before it: still waiting
    clock.now += 1
    dp.step(lambda: FIGURES)
    (taken,) = recorded(dp, DecisionTaken)
    assert (taken.decision, taken.by, taken.note) == (
        DecisionKind.WRAPUP, DecidedBy.DEADLINE, "no answer within 30 min")
    assert describe(taken) == ("decision: wrapup (by the deadline: nobody answered in time)")
    assert dp.pending is None and dp.journal.state.decided.waited_s == 30 * 60


def test_an_answer_in_the_room_closes_the_point_and_is_said_as_the_room_s(point):
    dp, clock = point(DEADLINE)
    dp.step(lambda: FIGURES)
    clock.now += 60
    dp.answer(CONTINUE, DecidedBy.ROOM)
    assert dp.pending is None  # and with it its deadline: nothing is left to cancel
    (taken,) = recorded(dp, DecisionTaken)
    assert (taken.decision, taken.by) == (DecisionKind.CONTINUE, DecidedBy.ROOM)
    assert describe(taken) == "decision: continue (by a person, in the room)"
    assert dp.journal.state.decided.waited_s == 60
    with pytest.raises(EngineError, match="no decision is pending"):
        dp.answer(WRAPUP, DecidedBy.COMMAND)  # answered already


def test_a_drop_typed_at_the_command_line_drops_each_variant_as_the_command_s(point):
    dp, _ = point(ASK)
    dp.step(lambda: FIGURES)
    with pytest.raises(EngineError, match="mandatory"):
        dp.answer(Decision.parse("drop:b,control"), DecidedBy.COMMAND)
    assert recorded(dp, DecisionTaken) == []  # refused whole: nothing recorded
    dp.answer(Decision.parse("drop:b,c"), DecidedBy.COMMAND)
    (taken,) = recorded(dp, DecisionTaken)
    assert (taken.decision, taken.drop, taken.by) == (
        DecisionKind.DROP, ("b", "c"), DecidedBy.COMMAND)
    assert describe(taken) == "decision: drop b,c (by a person, with `itera-tui decide`)"
    assert [(e.variant, e.reason) for e in recorded(dp, VariantDropped)] == [
        ("b", "decision by command"), ("c", "decision by command")]
    assert dp.journal.state.dropped == {"b", "c"}


def test_the_ledger_lines_are_those_the_string_decisions_wrote(point, tmp_path):
    """Recorded ledgers replay: a typed decision writes the very bytes of before."""
    dp, _ = point(ASK, given=Decision.drop("c"))
    dp.step(lambda: FIGURES)
    lines = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    asked, taken, dropped = lines[-3:]
    assert asked["event"] == "decision_pending" and asked["auto"] == "drop:c"
    assert [k for k in taken if k != "crc"] == ["seq", "t", "event", "decision", "drop", "by",
                                                "note"]
    assert (taken["decision"], taken["drop"], taken["by"]) == ("drop", ["c"], "cli")
    assert dropped["reason"] == "decision by cli"
    dp2, _ = point(ASK)  # the same folder's ledger read back by a fresh journal
    assert dp2.journal.state.decided.by is DecidedBy.FLAG


def test_a_plan_s_continue_is_held_until_the_pilots_are_seen(point):
    dp, _ = point(CONTINUES)
    dp.hold_continue(True)  # as a service does
    dp.step(lambda: FIGURES)
    (asked,) = recorded(dp, DecisionAsked)
    assert asked.auto is None  # held: the pending line does not promise it
    (taken,) = recorded(dp, DecisionTaken)
    assert (taken.decision, taken.by) == (DecisionKind.CONTINUE, DecidedBy.PLAN)
    assert describe(taken) == "decision: continue (by the plan: [pilot] decide)"


def test_a_held_continue_is_not_taken_when_the_control_s_pilot_failed(point):
    dp, clock = point(CONTINUES, given=CONTINUE)
    dp.hold_continue(True)
    dp.step(lambda: CONTROL_FAILED)
    assert recorded(dp, DecisionTaken) == [] and dp.pending is not None
    assert dp.held_warning.startswith("the control's pilot failed (exit 1)")
    assert not dp.waits_for_a_person()  # the service decides: headless ends, or it is released
    dp.release_held()
    dp.release_held()  # said once
    (warning,) = recorded(dp, WarningEvent)
    assert warning.message.startswith("not continuing by itself: the control's pilot failed")
    clock.now += 24 * 3600
    dp.step(lambda: CONTROL_FAILED)
    assert recorded(dp, DecisionTaken) == [] and dp.waits_for_a_person()
    dp.answer(WRAPUP, DecidedBy.ROOM)
    assert dp.journal.state.decided.by is DecidedBy.ROOM


def test_a_flag_given_at_start_is_taken_at_once_and_said_as_the_flag_s(point):
    dp, _ = point(ASK, given=CONTINUE)  # no service: nothing holds it
    dp.step(lambda: CONTROL_FAILED)
    (asked,) = recorded(dp, DecisionAsked)
    assert asked.auto == "continue" and asked.deadline is None
    (taken,) = recorded(dp, DecisionTaken)
    assert taken.by is DecidedBy.FLAG
    assert describe(taken) == "decision: continue (by `run --headless --decide`)"


def test_a_decision_crosses_the_wire_as_the_command_line_wrote_it():
    for text in ("continue", "wrapup", "drop:b", "drop:b,c"):
        decision = Decision.parse(text)
        assert decision.text == text
        line = encode(action_message(7, ActionKind.DECIDE, decision=decision.text))
        assert parse_request(line).decision == decision
    assert Decision.parse("drop:b,c").words == "drop b,c, then continue"
    assert WRAPUP.words == "wrap up"
    for bad, why in (("drop:", "needs at least one variant"), ("go", "unknown decision 'go'")):
        with pytest.raises(EngineError, match=why):
            Decision.parse(bad)
        with pytest.raises(ProtocolError, match=why):
            parse_request(encode(action_message(7, ActionKind.DECIDE, decision=bad)))


def _run(*acks: str) -> RunState:
    return RunState(id="b-run-1", target="b", kind="run", category="useful", attempt=1,
                    config_hash="x", state="running",
                    checkpoints=tuple(CheckpointAck(path=f"ck{i}", sha256=None, bytes=1,
                                                    write_s=None, block_s=None, step=i,
                                                    mode=mode, t=float(i))
                                      for i, mode in enumerate(acks)))


def test_one_rule_says_whether_a_run_can_answer_a_checkpoint_request(tmp_path):
    plan = load_plan(write_plan(tmp_path, VARIANTS, pilot=ASK))
    printer = _run()
    assert not can_checkpoint(printer, records=5, sdk_records=0)
    said = checkpoint_refusal(plan, printer, records=5, sdk_records=0)
    assert said.startswith("b-run-1 cannot checkpoint on request: it only prints")
    assert "metrics.jsonl" in said and "[checkpoint] watch" in said
    assert can_checkpoint(printer, records=5, sdk_records=2)  # the SDK's records
    assert can_checkpoint(printer, records=0, sdk_records=0)  # nothing yet: it may
    assert awaiting_first_record(printer, 0) and not awaiting_first_record(printer, 5)
    assert can_checkpoint(printer, records=None, sdk_records=None)  # not read yet
    # it answered a request before (the SDK's ack), though its metrics are printed
    assert can_checkpoint(_run("sync"), records=5, sdk_records=0)
    # a file the watch glob found is no answer: the script never reads a request
    assert not can_checkpoint(_run("watched"), records=5, sdk_records=0)


@pytest.mark.parametrize("client, by, words", [
    ("room", DecidedBy.ROOM, "by a person, in the room"),
    ("cli", DecidedBy.COMMAND, "by a person, with `itera-tui decide`")])
def test_a_drop_at_the_decision_point_is_said_as_the_face_s_that_sent_it(
        tmp_path, capsys, client, by, words):
    """`d` in the room (and `itera-tui drop` at the decision point) answers the decision
    with a drop: it was recorded as "user" ("a person: the room or `itera-tui
    decide`") whichever face sent it; the events panel and `status` now say which."""
    from tui.service.paths import socket_path
    from tui.service.protocol import Action
    from tui.service.server import EngineService
    from tui.service.status import print_status
    from tui.session import CampaignSession

    plan = load_plan(write_plan(tmp_path, VARIANTS, pilot=ASK))
    session = CampaignSession(plan, clock=FakeClock()).open()  # never ticked: no run starts
    try:
        session.engine.journal.record(DecisionAsked(pilot=FIGURES))
        service = EngineService(session, socket_path(plan.state_dir), hold_continue=False)
        reply = service._act(Action(1, ActionKind.DROP, variants=("b",), at_decision=True),
                             DecidedBy.of_client(client))
        assert reply.ok, reply.message
        (taken,) = [e for e in session.engine.journal.recent(1000)
                    if isinstance(e, DecisionTaken)]
        assert (taken.decision, taken.drop, taken.by) == (DecisionKind.DROP, ("b",), by)
        assert describe(taken) == f"decision: drop b ({words})"
        assert reply.message == "decision recorded: drop b, then continue"
    finally:
        session.close()
    capsys.readouterr()
    print_status(plan.path)
    said = [line for line in capsys.readouterr().out.splitlines() if "decision:" in line]
    assert len(said) == 1 and said[0].startswith(f"  decision: drop b ({words}) at ")
    ledger = read_ledger(plan.state_dir / "ledger.jsonl")
    report = _planned_vs_actual(compare(plan, replay(ledger), ledger))
    decisions = report[report.index("### Decisions") + 2]
    assert decisions.endswith(f": drop b ({words})")  # the bundle's report.md
    (dropped,) = [e for e in ledger if isinstance(e, VariantDropped)]
    assert describe(dropped) == f"dropped variant b (decision by {words[3:]})"


def test_each_view_says_who_decided_in_words_never_the_ledger_s_value():
    """The bundle's report wrote `by cli` for the `--decide` flag (which reads as the
    `itera-tui decide` command) and the events panel `decision by cli` for its drops."""
    from tui.engine.ledger.records import TakenDecision

    flag = TakenDecision(t=1.7e9, decision="drop", drop=("b",), by=DecidedBy.FLAG)
    assert flag.said == "drop b (by `run --headless --decide`)"
    assert describe(VariantDropped(seq=3, t=1.7e9, variant="b", reason="decision by cli")) \
        == "dropped variant b (decision by `run --headless --decide`)"
    assert describe(VariantDropped(seq=3, t=1.7e9, variant="b", reason="dropped by user")) \
        == "dropped variant b (dropped by user)"  # not a decision: its words as written
