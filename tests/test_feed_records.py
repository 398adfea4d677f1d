"""Issue 13, item 1: no record's content can raise in the feed or the live view.

Each hostile line is a fixture a run could write into metrics.jsonl. Before,
`{"step": Infinity}` raised OverflowError in the live view and deep nesting a
RecursionError, at every restart again. Now each unusable record is counted
in `bad_lines` and skipped, and the records around it still count.
"""

import json
import math

import pytest

from tui.campaign.plan import StopRule
from tui.engine.reading.feeds import JsonlFeed
from tui.engine.watching.live import RunLive
from tui.engine.reading.metric_records import MAX_DEPTH, parse_record
from tui.engine.rules import RuleSet

HOSTILE = {
    "infinite step": '{"step": Infinity, "loss": 0.4}',
    "nan step": '{"step": NaN, "loss": 0.4}',
    "negative step": '{"step": -3, "loss": 0.4}',
    "fractional step": '{"step": 2.5, "loss": 0.4}',
    "huge int step": '{"step": ' + "9" * 30 + ', "loss": 0.4}',
    "bool step": '{"step": true, "loss": 0.4}',
    "string step": '{"step": "three", "loss": 0.4}',
    "deep nesting": '{"x":' + "[" * 100000 + "]" * 100000 + "}",
    "unclosed deep nesting": '{"x":' + "[" * 100000,
    "nested past the bound": '{"x":' + "[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1) + "}",
    "huge int loss": '{"step": 1, "loss": ' + "1" * 400 + "}",
    "bool loss": '{"step": 1, "loss": true}',
    "null loss": '{"step": 1, "loss": null}',
    "word for a loss": '{"step": 1, "loss": "low"}',
    "list loss": '{"step": 1, "loss": [0.1, 0.2]}',
    "infinite time": '{"t": Infinity, "step": 1, "loss": 0.4}',
    "string time": '{"t": "noon", "step": 1, "loss": 0.4}',
    "number event": '{"event": 5}',
    "checkpoint path not a string": '{"event": "checkpoint", "path": 7, "sha256": "ab"}',
    "checkpoint bytes a string": '{"event": "checkpoint", "path": "c.pt", "bytes": "5"}',
    "resume ok a string": '{"event": "resume_check", "ok": "yes"}',
    "top-level array": "[1, 2, 3]",
    "top-level number": "42",
    "int too long to parse": '{"loss": ' + "1" * 5000 + "}",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_hostile_record_is_counted_and_skipped_never_raised(tmp_path, name):
    good = {"t": 100.0, "step": 1, "loss": 0.5, "acc": 0.9}
    after = {"t": 101.0, "step": 2, "loss": 0.25, "acc": 0.95}
    (tmp_path / "metrics.jsonl").write_text(
        json.dumps(good) + "\n" + HOSTILE[name] + "\n" + json.dumps(after) + "\n")
    rules = RuleSet((StopRule("non_finite", metrics=("loss",)),
                     StopRule("threshold", metric="acc", below=0.1, from_step=0)), "v", "run")
    for restart in range(2):  # a restart re-reads the same line and must survive it too
        live = RunLive("v", tmp_path, rules, (), "acc", "max", 0.0)
        assert live.poll(200.0) is None
        view = live.view()
        assert view.bad_lines == 1 and view.records == 2, name
        assert view.last_step == 2 and view.last_loss == 0.25 and view.best_metric == 0.95


def test_numbers_spelled_as_strings_become_numbers_so_a_quoted_nan_still_stops(tmp_path):
    (tmp_path / "metrics.jsonl").write_text(
        '{"step": "4", "loss": "0.5", "note": "warm-up"}\n{"step": 5.0, "loss": "nan"}\n')
    live = RunLive("v", tmp_path, RuleSet((StopRule("non_finite", metrics=("loss",)),), "v",
                                          "run"), (), "acc", "max", 0.0)
    stop = live.poll(1.0)
    assert stop is not None and stop.rule == "non_finite" and stop.step == 5
    assert live.view().last_values["note"] == "warm-up" and live.view().bad_lines == 0


def test_labels_and_vectors_in_a_record_are_not_bad(tmp_path):
    record = parse_record('{"step": 3, "loss": 0.5, "split": "val", "best": true, '
                          '"hist": [1, 2], "step_time": null}')
    assert record == {"step": 3, "loss": 0.5, "split": "val", "best": True, "step_time": None}


def test_an_event_without_a_step_yet_is_kept(tmp_path):
    record = parse_record('{"t": 1.0, "step": null, "event": "checkpoint", "path": "c.pt", '
                          '"sha256": "ab", "bytes": 10, "write_s": 0.1, "extra": {"a": 1}}')
    assert record == {"t": 1.0, "event": "checkpoint", "path": "c.pt", "sha256": "ab",
                      "bytes": 10, "write_s": 0.1}


def test_a_50_mb_jsonl_line_is_dropped_as_one_bad_line_and_the_next_is_read(tmp_path):
    path = tmp_path / "metrics.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"step": 1, "loss": 0.5}\n{"x": "')
        for _ in range(50):
            f.write(b"y" * (1 << 20))
        f.write(b'"}\n{"step": 2, "loss": NaN}\n')
    feed = JsonlFeed(path)
    records = []
    for _ in range(200):
        records += feed.poll()
        if not feed.more:
            break
    assert [r["step"] for r in records] == [1, 2] and math.isnan(records[1]["loss"])
    assert feed.bad_lines == 1


def test_an_sdk_line_is_scanned_without_json_loads_wrapper_and_others_get_its_verdict(monkeypatch):
    """The SDK's lines (a JSON object filling the line) are taken straight from the scanner
    json.loads ends in, skipping its wrapper's per-call work; whitespace around a value,
    trailing bytes or no JSON at all go to json.loads itself, so every line parses (or
    fails) exactly as json.loads would have it (issue 42: ingest at 0.37x a bare loop)."""
    from tui.engine.reading import metric_records

    calls = []
    real = json.loads
    monkeypatch.setattr(json, "loads", lambda text, *a, **k: calls.append(text) or real(text, *a, **k))
    lines = [json.dumps({"t": 1.5, "step": s, "loss": 1.0 / (s + 1), "lr": 3e-4}) for s in range(100)]
    assert [parse_record(line)["step"] for line in lines] == list(range(100))
    assert calls == []  # the wrapper's work is not done for them
    odd = [" " + lines[0], lines[0] + "\r", lines[0] + " x", "", "nan", '{"loss": NaN}',
           '{"a": 1}{"b": 2}', '{"a": ', "\ufeff" + lines[0], "[1, 2]", '"text"']
    for line in odd:
        try:
            want = ("ok", real(line))
        except ValueError as error:
            want = ("bad", type(error))
        try:
            got = ("ok", metric_records.loads(line))
        except ValueError as error:
            got = ("bad", type(error))
        assert repr(got) == repr(want), line
    assert parse_record(" " + lines[0])["step"] == 0 and parse_record(lines[0] + " x") is None
