"""Fuzz ledger lines: whatever a line holds, no face of the campaign tracebacks.

Random bytes, random JSON objects, the known events with random field types
(checksummed, so they reach validation) and, exhaustively, every field of
every event with awkward values: `read_ledger_report`, the replay after each
event, the views built on it (event lines, runs table, decision screen, the
bundle's planned-vs-actual) and `itera-tui status` (text and --json) never
raise, and a changed byte never replays as another fact. Bounded: seconds.
"""

import contextlib
from types import SimpleNamespace
import io
import json
import math
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from tui.app.rows import checkpoint_text, stop_short
from tui.app.pilot_figures import pilot_rows, pilot_table
from tui.bundle.actual import compare
from tui.campaign import load_plan
from tui.engine.ledger.lines import describe
from tui.engine.ledger.file import encode_line, read_ledger_report
from tui.engine.ledger.events import EVENT_TYPES, field_names

SCHEMAS = {kind: field_names(kind) for kind in EVENT_TYPES}
from tui.engine.ledger.state import StateBuilder, replay
from tui.service.status import print_status, status_dict

FUZZ = settings(max_examples=80, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


AWKWARD = st.sampled_from([0, 1, -1, 2**31, 2**70, -2**70, 1e300, -1e300, 1e11, 0.5, "",
                           "abc", "5", [], {}, [1], {"a": 1}, True, False, None])
JSON_LEAF = st.one_of(AWKWARD, st.none(), st.booleans(), st.integers(-2**70, 2**70),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12))
JSON_VALUE = st.recursive(JSON_LEAF, lambda kids: st.one_of(
    st.lists(kids, max_size=3), st.dictionaries(st.text(max_size=6), kids, max_size=3)),
    max_leaves=8)
@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    root = tmp_path_factory.mktemp("status")
    shutil.copy(REPO / "campaign.toml", root / "campaign.toml")
    (root / ".itera" / "runs" / "control-abc-1").mkdir(parents=True)
    return root


def views(plan, state, events) -> None:
    """What the faces derive from a state; each call may raise only if a view would."""
    for run in state.runs:
        run.to_dict()
        checkpoint_text(run, 1.7e9), stop_short(run.stop)  # the runs table
        dict(run.config.get("params") or {})  # the bundle's run entry
    if state.decision_pending is not None:
        room = SimpleNamespace(state=state, engine=SimpleNamespace(live={}))
        pilot_table(plan, pilot_rows(plan, state.decision_pending, room), 76)  # decision screen
    compare(plan, state, events)  # the bundle's planned-vs-actual


def everything_reads(root: Path, data: bytes) -> None:
    """The ledger as each face reads it, after every event (a later event must not
    hide what an earlier one did); any exception fails the example."""
    ledger = root / ".itera" / "ledger.jsonl"
    ledger.write_bytes(data)
    report = read_ledger_report(ledger, root / ".itera" / "runs")
    for d in report.damage:
        assert d.text and json.dumps(d.to_dict())
    plan = load_plan(root / "campaign.toml", check_files=False)
    builder = StateBuilder()
    for i, ev in enumerate(report.events):
        describe(ev)  # the events panel and the headless log
        builder.apply(ev)
        views(plan, builder.freeze(), list(report.events[:i + 1]))
    assert builder.freeze() == replay(report.events)
    json.dumps(status_dict(root / "campaign.toml"), default=str)
    with contextlib.redirect_stdout(io.StringIO()):
        assert print_status(root / "campaign.toml") == 0
        assert print_status(root / "campaign.toml", as_json=True) == 0


START = [{"seq": 1, "t": 1.7e9, "event": "campaign_started", "plan_sha256": "x"},
         {"seq": 2, "t": 1.7e9, "event": "window_started", "start": 1.7e9,
          "end": 1.7e9 + 3600, "hours": 1.0}]


@FUZZ
@given(lines=st.lists(st.binary(max_size=120), max_size=8), tail=st.binary(max_size=40))
def test_random_bytes_never_raise(campaign, lines, tail):
    head = b"".join(encode_line(r) for r in START)
    everything_reads(campaign, head + b"\n".join(lines) + b"\n" + tail)


@FUZZ
@given(records=st.lists(st.one_of(JSON_VALUE, st.dictionaries(
    st.sampled_from(["seq", "t", "event", "run", "start", "kind", "crc"]), JSON_VALUE)),
    max_size=6), checksummed=st.booleans())
def test_random_json_lines_never_raise(campaign, records, checksummed):
    out = [encode_line(r) for r in START]
    for record in records:
        if checksummed and isinstance(record, dict) and set(record) - {"crc"}:
            out.append(encode_line({k: v for k, v in record.items() if k != "crc"}))
        else:
            out.append(json.dumps(record).encode() + b"\n")
    everything_reads(campaign, b"".join(out))


RIGHT = {  # a right value for every field of every schema
    "plan_sha256": "ab", "frozen_plan": ".itera/plan.toml", "tool_version": "0.1", "pid": 1234,
    "run": "control-abc-1", "target": "control", "kind": "run", "category": "mandatory",
    "attempt": 1, "config_hash": "abc", "config": {"argv": ["python"], "params": {"lr": 1}},
    "pid_start": 1.7e9, "lanes": ["demo:0"], "devices": "0", "lot": "demo", "max_steps": 10,
    "reason": "r", "exit_code": 0, "note": "n", "duration_s": 1.0, "signal": "SIGTERM",
    "after_s": 1.0, "rule": "user", "value": 0.5, "step": 3, "record_t": 1.7e9, "by": "user",
    "deadline": 1.7e9, "term_at": 1.7e9, "error": "e", "request_seq": 1, "path": "ckpt/x.pt", "sha256": "ab", "digest": "xxh3_128:ab", "bytes": 10,
    "write_s": 0.1, "block_s": 0.1, "mode": "sync", "ok": True, "problem": "p",
    "steps_compared": 2, "max_abs_diff": 0.0, "decision": "continue", "drop": ["wide"],
    "variant": "wide", "message": "m", "bundle": "outputs/b", "verified": True,
    "failures": 0, "start": 1.7e9, "end": 1.7e9 + 3600, "hours": 1.0,
    "default": "drop-stopped", "auto": "continue", "restarts": 1,
    "by_s": 3600.0, "wall_before": 1.7e9, "grace_s": 5.0,
    "processes": [{"pid": 4321, "name": "python", "command": "python x.py", "how": "env"}],
    "unverified": {"control-abc-1": "model.pt does not reload"},
    "held": ".itera-held/3-ab/x.pt", "delivered_path": "hf-out/checkpoint-4",
    "delivered_step": 4, "delivered_metric": "eval_loss", "delivered_value": 0.4,
    "resumes": "control-abc-1", "resume_from": "checkpoints/step-000005.pt",
    "resume_run": "control-abc-1", "step_by_time": 4,
    "resume_reason": "its box went away", "signaled": True, "grace_s": 60.0,
    "runs": ["control-abc-1"], "host": "box-a", "notice": "spot reclaimed",
    "saved": {"control-abc-1": "checkpoints/step-000005.pt"}, "unsaved": [],
    "waited_s": 2.0, "store": "s3://bucket/camp", "from_host": "box-a",
    "cut": ["control-abc-1"], "last_t": 1.7e9, "window_hours": 24.0, "price_usd": 12.5,
    "checkpoints": {"control-abc-1": "checkpoints/step-000005.pt"},
    "url": "s3://b/p/lot1", "key": "lot1/plan.toml", "down_s": 60.0, "stored": 3,
    "files": 4, "seconds": 1.5, "problems": ["report.md: sha256 differs"],
    "first_step": 0, "read_whole": True, "final_metric": 0.5, "non_finite": "n", "unread_bytes": 0,
    "stopped_by": "wrapup", "skipped_bytes": 4096, "backlog_bytes": 1024,
    "retry": 1, "retried": "retry 1 of 2 after exit -9 (killed by SIGKILL)",
    "not_retried": "exit -9 (killed by SIGKILL); its 2 retries already made",
    "pilot": {"control": {"run": "control-abc-1", "state": "completed", "stop": None,
                          "metric": 0.5, "last_loss": 0.1, "step": 40}}}


def launched(seq: int, run: str) -> dict:
    return {"seq": seq, "t": 1.7e9, "event": "run_launched"} | {
        k: RIGHT[k] for k in SCHEMAS["run_launched"]} | {"run": run}


@st.composite
def known_event(draw, seq):
    event = draw(st.sampled_from(sorted(SCHEMAS)))
    record = {"seq": seq, "t": draw(st.one_of(st.just(1.7e9 + seq), JSON_LEAF)),
              "event": event}
    for name in SCHEMAS[event]:
        choice = draw(st.integers(0, 3))
        if choice == 0:
            continue  # absent
        record[name] = (RIGHT[name] if choice == 1 else draw(AWKWARD) if choice == 2
                        else draw(JSON_VALUE))
    return record


@FUZZ
@given(data=st.data())
def test_known_events_with_random_field_types_never_raise(campaign, data):
    records = [data.draw(known_event(seq)) for seq in range(3, 3 + data.draw(st.integers(1, 8)))]
    everything_reads(campaign, b"".join(encode_line(r) for r in START + records))


AWKWARD_VALUES = [0, 1, -1, 2**31, 2**70, -2**70, 1e300, -1e300, 1e11, 0.5, "", "abc", "5",
                  [], {}, [1], ["a"], {"a": 1}, {"a": [1]}, {"params": [1]}, {"argv": "x"},
                  {"control": [1]}, {"control": {"metric": "x"}}, True, None]
FIELDS = [(event, name) for event in sorted(SCHEMAS)
          for name in [*SCHEMAS[event], "t", "event"]]


@pytest.mark.parametrize("event, name", FIELDS, ids=[f"{e}.{n}" for e, n in FIELDS])
def test_every_field_of_every_event_with_every_awkward_value(campaign, event, name):
    """Exhaustive where the fuzzer samples: one field wrong at a time, the rest right,
    each on a run of its own so that no earlier line hides what a later one does."""
    records, seq = list(START), 3
    for value in AWKWARD_VALUES:
        record = {"seq": seq, "t": 1.7e9 + seq, "event": event}
        record |= {k: RIGHT[k] for k in SCHEMAS[event]}
        if "run" in SCHEMAS[event] and name != "run":
            if event != "run_launched":
                records.append(launched(seq, f"r-{seq}"))
                seq += 1
                record["seq"] = seq
            record["run"] = f"r-{seq - (event != 'run_launched')}"
        record[name] = value
        records.append(record)
        seq += 1
    everything_reads(campaign, b"".join(encode_line(r) for r in records))


@pytest.mark.parametrize("value", AWKWARD_VALUES, ids=repr)
def test_a_wild_seq_never_raises(campaign, value):
    """One ledger per value: after a wild seq every later line would be a repeat."""
    record = launched(3, "r-3") | {"seq": value}
    everything_reads(campaign, b"".join(encode_line(r) for r in START + [record]
                                        + [launched(4, "r-4")]))


def test_every_schema_field_has_a_right_value_that_passes():
    from tui.engine.ledger.events import problem_of

    for event, fields in SCHEMAS.items():
        record = {"seq": 1, "t": 1.7e9, "event": event} | {k: RIGHT[k] for k in fields}
        assert problem_of(record) is None, event


def test_the_fuzzers_reach_validation_and_replay(campaign):
    """The mutated inputs are not all rejected at the door: each kind gets through."""
    runs = {"seq": 3, "t": 1.7e9, "event": "run_launched"} | {
        k: RIGHT[k] for k in ("run", "target", "kind", "category", "attempt", "config_hash")}
    everything_reads(campaign, b"".join(encode_line(r) for r in START + [runs]))
    report = read_ledger_report(campaign / ".itera" / "ledger.jsonl")
    assert len(report.events) == 3 and replay(report.events).runs[0].state == "running"
    assert math.isfinite(report.events[-1]["t"])


@FUZZ
@given(at=st.one_of(st.integers(0, 10**6), st.integers(76, 90)), byte=st.integers(0, 255))
def test_any_changed_byte_is_damage_never_a_different_event(campaign, at, byte):
    """The checksum's promise: one changed byte anywhere never replays as another fact
    (76-90: the first line's own crc field)."""
    records = START + [launched(3, "control-abc-1")]
    data = bytearray(b"".join(encode_line(r) for r in records))
    at %= len(data)
    if data[at] == byte:
        byte ^= 0x01
    data[at] = byte
    path = campaign / ".itera" / "ledger.jsonl"
    path.write_bytes(bytes(data))
    report = read_ledger_report(path)
    for event in report.events:  # a byte of the `"crc"` name itself, on the first line,
        # reads as a legacy line: the same fact, its checksum under a misspelt key
        ev = json.loads(json.dumps(event.to_record()))  # as its line says it
        original = records[ev["seq"] - 1]
        extra = set(ev) - set(original)
        assert {k: ev[k] for k in original if k in ev} == original and len(extra) <= 1
        assert not extra or ev["seq"] == 1 and len(str(ev[extra.pop()])) == 8
    assert report.damage or report.torn_tail_bytes or len(report.events) == len(records)


def test_the_checksum_is_a_crc32_any_reader_recomputes():
    import zlib

    line = encode_line(START[1])[:-1]
    assert line[-20:-10] == b', "crc": "' and line.endswith(b'"}')
    assert line[-10:-2] == b"%08x" % zlib.crc32(line[:-20] + b"}")
    assert json.loads(line[:-20] + b"}") == START[1]
