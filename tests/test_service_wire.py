"""The engine's wire, without processes: records round-trip, requests are checked.

A snapshot the engine sends comes back as the same frozen records (tuples stay
tuples, a frozenset stays one, inf and NaN survive, int keys stay ints); a
message can name only this package's own dataclasses; every request is typed
and bounded before the engine sees it; the charts' points are cut to an
envelope that keeps every extreme, and put back between whole snapshots.
"""

from __future__ import annotations

import json
import math

import pytest

from tui.engine.ledger.records import StopRecord, WarningRecord
from tui.engine.ledger.state import CampaignState, RunState
from tui.engine.views import EngineSnapshot, LiveView
from tui.service.codec import WireError, from_wire, to_wire
from tui.service.histories import (envelope, enveloped, with_histories_of,
                                   without_histories)
from tui.service.protocol import (MAX_REQUEST_BYTES, Action, ActionKind, Hello, Ping,
                                  ProtocolError, Subscribe, action_message, parse_request)
from tui.session.snapshot import (LinkState, LinkStatus, Projection, SessionSnapshot,
                                  WrapupProgress)


def a_snapshot(points: int = 10) -> SessionSnapshot:
    run = RunState(id="control-abc-1", target="control", kind="run", category="mandatory",
                   attempt=1, config_hash="abc", state="stopped", launched_t=1.0, ended_t=2.0,
                   lanes=("demo:0",), stop=StopRecord("non_finite", "loss = nan", "nan", 24,
                                                      2.0),
                   config={"command": ["python", "train.py"], "params": {"lr": 3e-3}})
    state = CampaignState(runs=(run,), dropped=frozenset({"hot_lr", "wide"}),
                          warnings=(WarningRecord(1.5, "GPU idle"),), events=12,
                          unreadable=(3, 4))
    live = LiveView(run.id, records=5, bad_lines=1, last_step=24, last_loss=float("inf"),
                    last_values={"loss": float("nan"), "acc": 0.5}, best_metric=0.5,
                    last_record_t=2.0, first_record_t=1.0,
                    loss_history=tuple((float(i), 1.0 / (i + 1)) for i in range(points)),
                    metric_history=((1.0, 0.5),), global_step=24, problems=("x",))
    engine = EngineSnapshot(t=2.0, state=state, phase="runs", live={run.id: live},
                            checkpoint_interval_min=None, finished=False)
    return SessionSnapshot(now=3.0, engine=engine, projection=Projection(4.0, 5.0, "calendar"),
                           holders=((0, (run.id,)), (1, ())),
                           wrapup=WrapupProgress(lines=("a", "b")),
                           link=LinkStatus(LinkState.CONNECTED, 1.0))


def through_the_wire(obj):
    return from_wire(json.loads(json.dumps(to_wire(obj), allow_nan=False)))


def test_a_snapshot_comes_back_as_the_same_frozen_records():
    snap = a_snapshot()
    back = through_the_wire(snap)
    assert isinstance(back, SessionSnapshot) and isinstance(back.engine, EngineSnapshot)
    assert back.state.runs == snap.state.runs and back.state.runs[0].stop.rule == "non_finite"
    assert back.state.dropped == frozenset({"hot_lr", "wide"})
    assert back.state.unreadable == (3, 4) and back.holders == ((0, (snap.state.runs[0].id,)),
                                                               (1, ()))
    view = back.engine.live["control-abc-1"]
    assert view.last_loss == math.inf and math.isnan(view.last_values["loss"])
    assert view.loss_history == snap.engine.live["control-abc-1"].loss_history
    assert back.link.state is LinkState.CONNECTED and back.wrapup.lines == ("a", "b")
    assert back.projection == snap.projection and back.state.warnings == snap.state.warnings


def test_int_keys_and_tag_like_keys_survive():
    assert through_the_wire({1: "a", 2: ("b",)}) == {1: "a", 2: ("b",)}
    assert through_the_wire({"__r": "not a record"}) == {"__r": "not a record"}


@pytest.mark.parametrize("name", ["os:system", "subprocess:Popen", "builtins:eval",
                                  "tui.engine.engine:Engine", "tui.nothing:Here",
                                  "tui.engine.ledger.state:RunState.__init__", "json:loads"])
def test_a_message_can_only_build_this_package_s_own_records(name):
    with pytest.raises(WireError):
        from_wire({"__r": name, "f": {}})


@pytest.mark.parametrize("bad", [{"__t": 3}, {"__m": [[1]]}, {"__m": [[[1], 2]]},
                                 {"__p": [1, 2, 3]}, {"__p": ["a", "b"]}, {"__f": "x"},
                                 {"__r": "tui.engine.ledger.records:StopRecord", "f": {"nope": 1}},
                                 {"__r": "tui.engine.ledger.records:StopRecord", "f": 3}])
def test_malformed_tags_are_wire_errors_never_crashes(bad):
    with pytest.raises(WireError):
        from_wire(bad)


def test_nesting_past_the_limit_is_refused():
    deep = "x"
    for _ in range(200):
        deep = [deep]
    with pytest.raises(WireError):
        from_wire(deep)


def test_requests_are_typed_and_bounded():
    assert parse_request(b'{"op": "hello", "protocol": 1, "client": "room"}') == Hello(1, "room")
    assert parse_request(b'{"op": "subscribe", "from_seq": 7}') == Subscribe(7, True, 0)
    assert parse_request(b'{"op": "ping", "id": 3}') == Ping(3)
    line = json.dumps(action_message(4, ActionKind.STOP, run="r1", reason="why")).encode()
    assert parse_request(line) == Action(4, ActionKind.STOP, run="r1", reason="why")
    drop = json.dumps(action_message(5, ActionKind.DROP, variants=["a", "b"],
                                     at_decision=True)).encode()
    assert parse_request(drop).variants == ("a", "b") and parse_request(drop).at_decision
    for raw, words in [(b"[1]", "not a JSON object"), (b'{"op": "x"}', "unknown op"),
                       (b'{"op": "action", "id": 1, "action": "sh"}', "unknown action"),
                       (b'{"op": "action", "id": true, "action": "pause"}', "whole number"),
                       (b'{"op": "action", "id": 1, "action": "stop", "args": {"run": ""}}',
                        "non-empty"),
                       (b'{"op": "action", "id": 1, "action": "stop", "args": {"run": "r", '
                        b'"reason": 5}}', "reason"),
                       (b'{"op": "action", "id": 1, "action": "drop", "args": {"variants": '
                        b'[]}}', "list of 1"),
                       (b'{"op": "action", "id": 1, "action": "pause", "args": {"paused": 1}}',
                        "true or false"),
                       (b'{"op": "hello"}', "protocol"),
                       (b"x" * (MAX_REQUEST_BYTES + 1), "longer than")]:
        with pytest.raises(ProtocolError, match=words):
            parse_request(raw)


def test_the_envelope_keeps_every_extreme_and_the_order():
    points = tuple((float(i), math.sin(i / 7.0) + (100.0 if i == 1500 else 0.0))
                   for i in range(4000))
    cut = envelope(points, 512)
    assert len(cut) <= 512
    assert max(p[1] for p in cut) == max(p[1] for p in points)  # the spike survives
    assert min(p[1] for p in cut) == min(p[1] for p in points)
    assert [p[0] for p in cut] == sorted(p[0] for p in cut)
    assert envelope(points[:100], 512) == points[:100]


def test_points_left_out_between_whole_snapshots_are_put_back_by_the_client():
    whole = enveloped(a_snapshot(3000))
    assert len(whole.engine.live["control-abc-1"].loss_history) <= 512
    thin = through_the_wire(without_histories(a_snapshot(3000)))
    assert thin.engine.live["control-abc-1"].loss_history == ()
    back = with_histories_of(thin, whole)
    assert back.engine.live["control-abc-1"].loss_history == \
        whole.engine.live["control-abc-1"].loss_history
    assert back.engine.live["control-abc-1"].records == 5


def test_a_ledger_event_holding_nan_crosses_the_wire():
    """The ledger writes a NaN pilot loss as `NaN`; an event crosses the wire as its
    ledger line's object, read back by the ledger's own checks, NaN and inf kept (strict
    JSON refused them: the engine's tick failed on the inf pilot of the demo)."""
    import json

    from tui.engine.ledger.events import DecisionAsked, parse
    from tui.service.protocol import event_message

    ev = DecisionAsked(seq=3, t=1.0, pilot={"hot_lr": {"last_loss": float("nan"),
                                                       "metric": float("-inf")}})
    back = parse(json.loads(event_message(ev))["event"])
    assert isinstance(back, DecisionAsked) and back.seq == 3
    assert math.isnan(back.pilot["hot_lr"]["last_loss"])
    assert back.pilot["hot_lr"]["metric"] == -math.inf


def test_the_protocol_version_changes_with_the_event_shapes():
    """An engine and a client of two releases check the protocol at hello; events cross
    as their ledger fields, so a change of any event's fields needs a new version."""
    from tui.engine.ledger.events import shapes_digest
    from tui.service.protocol import EVENT_SHAPES_BY_VERSION, PROTOCOL_VERSION

    assert EVENT_SHAPES_BY_VERSION.get(PROTOCOL_VERSION) == shapes_digest(), (
        "an event's fields changed: raise PROTOCOL_VERSION and record its shapes "
        f"({shapes_digest()}) in EVENT_SHAPES_BY_VERSION")