"""A damaged ledger is reported line by line and never silently relaunches or resets.

Every damage class of issue 13 is a fixture applied to the ledger of a finished
campaign (one printer run driven by the engine, on the fake processes of its
process port: tests/fakeprocs.py): a NUL-overwritten
`run_launched` line, a deleted one, an empty or missing ledger beside the run
directories, a bare `{"event": "run_launched"}`, a `"start": "abc"` window.
"""

import json
import shutil

import pytest

from clikit import cli
from enginekit import printer_cmd, write_plan
from fakeprocs import drive_plan
from tui.engine import EngineError
from tui.engine.ledger.file import Ledger, read_ledger_report
from tui.engine.ledger.damage import damage_warnings
from tui.engine.ledger.file import check_can_open
from tui.engine.ledger.state import replay
from tui.engine.ledger.events import QueuePaused


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    root = tmp_path_factory.mktemp("finished")
    path = write_plan(root, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--jsonl", "--steps", "5", "--sleep", "0.01")}
    minutes = 1
    """)
    drive_plan(path)
    return root


@pytest.fixture
def campaign(finished, tmp_path):
    root = tmp_path / "c"
    shutil.copytree(finished, root)
    return root


def ledger_lines(root):
    return (root / ".itera" / "ledger.jsonl").read_bytes().split(b"\n")[:-1]


def write_lines(root, lines):
    (root / ".itera" / "ledger.jsonl").write_bytes(b"".join(line + b"\n" for line in lines))


def index_of(lines, event):
    return next(i for i, line in enumerate(lines) if json.loads(line)["event"] == event)


def legacy(lines):
    """The same events as written before checksums (no crc field)."""
    out = []
    for line in lines:
        record = json.loads(line)
        record.pop("crc")
        out.append(json.dumps(record).encode())
    return out


def report_of(root):
    return read_ledger_report(root / ".itera" / "ledger.jsonl", root / ".itera" / "runs")


def status(root, *flags):
    result = cli("status", *flags, str(root / "campaign.toml"), cwd=root)
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    return result.stdout


def test_a_whole_ledger_has_no_damage_and_every_line_a_checksum(campaign):
    report = report_of(campaign)
    assert report.damage == () and report.fatal is None and report.legacy_lines == 0
    assert all(b'"crc": "' in line for line in ledger_lines(campaign))
    assert replay(report.events).runs[0].state == "completed"
    assert check_can_open(campaign / ".itera").events == report.events


def test_nul_overwritten_run_launched_is_named_and_refused(campaign):
    lines = ledger_lines(campaign)
    k = index_of(lines, "run_launch_intent")  # the intent claims the run too: lose both
    i = index_of(lines, "run_launched")
    run = json.loads(lines[i])["run"]
    lines[k] = b"\0" * len(lines[k])
    lines[i] = b"\0" * len(lines[i])
    write_lines(campaign, lines)
    report = report_of(campaign)
    damage = report.damage[-1]
    assert len(report.damage) == 2
    assert damage.text == (f"line {i + 1} (seq {i + 1}?): not a JSON record (NUL bytes); "
                           "an unknown event lost")
    assert report.unknown_run_dirs == (run,)
    assert replay(report.events).runs == ()  # what a silent skip would have replayed
    with pytest.raises(EngineError) as refused:
        check_can_open(campaign / ".itera")
    message = str(refused.value)
    assert f"run directory {run} has no run_launched event" in message
    assert "launched again" in message and "mv .itera .itera.old" in message
    out = status(campaign)
    assert f"ledger damage: line {i + 1} (seq {i + 1}?)" in out
    assert "the engine will refuse to go on" in out


def test_deleted_run_launched_line_is_a_gap_and_refused(campaign):
    lines = ledger_lines(campaign)
    i = index_of(lines, "run_launched")
    del lines[i]
    del lines[index_of(lines, "run_launch_intent")]  # the line before: one gap of two
    write_lines(campaign, lines)
    report = report_of(campaign)
    (damage,) = report.damage
    assert damage.text == f"seqs {i}-{i + 1}: missing (line deleted); 2 unknown events lost"
    with pytest.raises(EngineError, match="has no run_launched event"):
        check_can_open(campaign / ".itera")
    data = json.loads(status(campaign, "--json"))
    assert data["ledger"]["damage"][0]["seq"] == i  # the first seq of the gap
    assert data["ledger"]["damage"][0]["line"] is None
    assert data["ledger"]["fatal"]


def test_a_lost_run_launched_is_rebuilt_from_its_intent_never_relaunched(campaign):
    from enginekit import drive

    lines = ledger_lines(campaign)
    i = index_of(lines, "run_launched")
    run = json.loads(lines[i])["run"]
    lines[i] = b"\0" * len(lines[i])
    write_lines(campaign, lines)
    check_can_open(campaign / ".itera")  # the intent still claims the run: survivable
    engine = drive(campaign / "campaign.toml")
    (again,) = engine.state.runs
    assert again.id == run and again.state == "completed"  # its exit.json, not a relaunch
    messages = [w.message for w in engine.state.warnings]
    assert any(f"line {i + 1}" in m for m in messages)  # the damage is said, not skipped


@pytest.mark.parametrize("how", ["empty", "missing"])
def test_empty_or_missing_ledger_beside_run_dirs_refuses_to_start_over(campaign, how):
    path = campaign / ".itera" / "ledger.jsonl"
    path.write_bytes(b"") if how == "empty" else path.unlink()
    run = next((campaign / ".itera" / "runs").iterdir()).name
    with pytest.raises(EngineError) as refused:
        check_can_open(campaign / ".itera")
    assert str(refused.value) == (
        f"ledger.jsonl is {how} but .itera/runs/ holds 1 run directory ({run}): refusing "
        "to start the campaign over. To start afresh on purpose, move .itera/ aside "
        "(`itera-tui new` archives it with the outputs, or mv .itera .itera.old) and start "
        "again.".replace("ledger.jsonl", ".itera/ledger.jsonl", 1))


def test_empty_run_dirs_lost_nothing_and_a_fresh_campaign_opens(tmp_path):
    (tmp_path / ".itera" / "runs" / "control-abc-1").mkdir(parents=True)
    assert check_can_open(tmp_path / ".itera").empty
    assert check_can_open(tmp_path / "nothing-here").exists is False


@pytest.mark.parametrize("checksummed", [True, False])
def test_bare_run_launched_is_damage_not_a_traceback(campaign, checksummed):
    lines = ledger_lines(campaign)
    lines = lines if checksummed else legacy(lines)
    lines.insert(3, b'{"event": "run_launched"}')
    write_lines(campaign, lines)
    report = report_of(campaign)
    (damage,) = report.damage
    problem = ("no checksum (written after checksummed lines)" if checksummed
               else "field 'seq' is missing")
    assert damage.problem == problem and damage.event == "run_launched"
    assert damage.line == 4 and damage.lost_count == 0  # its neighbours are consecutive
    assert report.fatal is None  # an extra line: the real run_launched is still there
    assert replay(report.events).runs[0].state == "completed"
    assert "ledger damage: line 4" in status(campaign)


def test_only_a_bare_run_launched_is_refused_with_what_it_was(campaign):
    write_lines(campaign, [b'{"event": "run_launched"}'])
    with pytest.raises(EngineError, match="a run_launched event lost .that run would be "
                                          "launched again"):
        check_can_open(campaign / ".itera")
    data = json.loads(status(campaign, "--json"))
    assert data["phase"] == "not started"
    assert data["ledger"]["damage"][0]["event"] == "run_launched"


@pytest.mark.parametrize("checksummed", [True, False])
def test_window_start_abc_is_damage_and_refused(campaign, checksummed):
    lines = ledger_lines(campaign)
    lines = lines if checksummed else legacy(lines)
    i = index_of(lines, "window_started")
    record = json.loads(lines[i])
    lines[i] = lines[i].replace(json.dumps(record["start"]).encode(), b'"abc"', 1)
    write_lines(campaign, lines)
    (damage,) = report_of(campaign).damage
    problem = ("checksum mismatch" if checksummed
               else "field 'start' must be a time (seconds since 1970), got 'abc'")
    assert damage.text == f"line {i + 1} (seq {i + 1}?): {problem}; a window_started event lost"
    with pytest.raises(EngineError, match="the rental window would be reset"):
        check_can_open(campaign / ".itera")
    assert "window_started event lost" in status(campaign)


def test_a_legacy_ledger_reads_whole_and_grows_checksummed_lines(campaign):
    lines = legacy(ledger_lines(campaign))
    write_lines(campaign, lines)
    before = report_of(campaign)
    assert before.damage == () and before.legacy_lines == len(lines)
    ledger = Ledger(campaign / ".itera" / "ledger.jsonl", clock=lambda: 2e9)
    ledger.append(QueuePaused())
    after = report_of(campaign)
    assert after.damage == () and after.events[-1]["seq"] == len(lines) + 1
    with open(ledger.path, "ab") as f:  # a crc-less line after checksummed ones is not legacy
        f.write(lines[-1].replace(f'"seq": {len(lines)}'.encode(),
                                  f'"seq": {len(lines) + 2}'.encode()) + b"\n")
    assert report_of(campaign).damage[0].problem == ("no checksum (written after "
                                                     "checksummed lines)")


def test_a_nul_block_that_ate_a_newline_costs_only_the_junk(campaign):
    lines = ledger_lines(campaign)
    lines[2] = b"\0" * 40 + lines[2]
    write_lines(campaign, lines)
    report = report_of(campaign)
    assert len(report.events) == len(lines)  # the event after the junk is whole: kept
    (damage,) = report.damage
    assert damage.text == "line 3: 40 bytes of junk before the event; nothing lost"
    assert report.fatal is None


def test_a_copied_line_is_not_replayed_twice(campaign):
    lines = ledger_lines(campaign)
    lines.append(lines[index_of(lines, "run_launched")])  # would reset the run to running
    write_lines(campaign, lines)
    report = report_of(campaign)
    assert "again after seq" in report.damage[0].problem and report.fatal is None
    assert replay(report.events).runs[0].state == "completed"


def test_survivable_damage_opens_and_is_warned_once(campaign):
    lines = ledger_lines(campaign)
    i = index_of(lines, "run_exited")
    lines[i] = lines[i].replace(b'"exit_code": 0', b'"exit_code": 1')  # a bit flip
    write_lines(campaign, lines)
    report = check_can_open(campaign / ".itera")  # the engine re-records the exit
    assert report.damage[0].event == "run_exited"
    (warning,) = damage_warnings(report)
    assert warning == (f"ledger damage: line {i + 1} (seq {i + 1}?): checksum mismatch; "
                       "a run_exited event lost")
    assert damage_warnings(report, {warning}) == []


def test_a_new_ledger_never_reuses_the_seq_of_a_damaged_line(campaign):
    lines = ledger_lines(campaign)
    lines[-1] = b"\0" * len(lines[-1])
    write_lines(campaign, lines)
    ledger = Ledger(campaign / ".itera" / "ledger.jsonl", clock=lambda: 2e9)
    assert ledger.append(QueuePaused())["seq"] == len(lines) + 1


def test_a_ledger_that_cannot_be_read_is_refused_and_shown(campaign):
    path = campaign / ".itera" / "ledger.jsonl"
    path.unlink()
    path.mkdir()  # e.g. a restore gone wrong
    with pytest.raises(EngineError, match="ledger.jsonl cannot be read .Is a directory"):
        check_can_open(campaign / ".itera")
    assert "cannot be read" in status(campaign)


@pytest.mark.parametrize("how", ["legacy repeats", "junk"])
def test_the_next_seq_never_leaves_a_false_gap(campaign, how):
    lines = ledger_lines(campaign)
    if how == "junk":
        lines[1] = b"\0" * 12 + lines[1]  # junk glued before a whole event: two entries
    else:
        lines = legacy(lines)
        lines.insert(3, lines[2])  # the old renumbering bug left repeated legacy seqs
    write_lines(campaign, lines)
    ledger = Ledger(campaign / ".itera" / "ledger.jsonl", clock=lambda: 2e9)
    last = json.loads(lines[-1])["seq"]
    assert ledger.append(QueuePaused())["seq"] == last + 1
    assert all(d.lost_count == 0 for d in report_of(campaign).damage)


def test_an_empty_ledger_the_engine_refuses_is_fatal_in_status(campaign):
    """status --json's `fatal` carries the engine's own refusal, an emptied ledger
    beside run directories included (it said null while the engine refused)."""
    write_lines(campaign, [])
    assert report_of(campaign).fatal is None  # no damaged line: the report alone saw nothing
    with pytest.raises(EngineError, match="launched again") as refused:
        check_can_open(campaign / ".itera", strict_run_dirs=True)
    data = json.loads(status(campaign, "--json"))
    assert data["ledger"]["fatal"] == str(refused.value)
    assert "the engine will refuse to go on: .itera/ledger.jsonl is damaged" in status(campaign)
