"""Ledger appends on a bad day: short writes, a full disk, a torn last line.

A short write is finished, never dropped; a failed append raises an OSError
naming the ledger and cuts its own partial bytes, so the ledger stays
parseable and the next event never glues onto a torn one. The disk-full test
runs on a real 256 KiB tmpfs (skipped with its reason where mounting is not
permitted).
"""

import errno
import os
import subprocess
import uuid

import pytest

from tui.engine.ledger.file import Ledger, encode_line, read_ledger_report
from tui.engine.ledger.events import ClockStepped, QueuePaused, QueueResumed, RunExited, RunLeftovers, WarningEvent

REAL_WRITE = os.write


def seqs(path):
    return [ev["seq"] for ev in read_ledger_report(path).events]


def clean(path):
    report = read_ledger_report(path)
    return report.damage == () and report.torn_tail_bytes == 0


def test_short_writes_are_finished_not_dropped(tmp_path, monkeypatch):
    calls = []

    def seven_bytes_at_a_time(fd, data):
        calls.append(len(data))
        return REAL_WRITE(fd, bytes(data[:7]))

    ledger = Ledger(tmp_path / "ledger.jsonl", clock=lambda: 1.0)
    monkeypatch.setattr(os, "write", seven_bytes_at_a_time)
    ledger.append(WarningEvent(message="a message longer than seven bytes"))
    ledger.append(QueuePaused())
    monkeypatch.undo()
    assert len(calls) > 4 and clean(ledger.path) and seqs(ledger.path) == [1, 2]


def test_a_write_that_fails_half_way_takes_its_bytes_back(tmp_path, monkeypatch):
    ledger = Ledger(tmp_path / "ledger.jsonl", clock=lambda: 1.0)
    ledger.append(QueuePaused())
    written = []

    def half_then_full(fd, data):
        if written:
            raise OSError(errno.ENOSPC, "No space left on device")
        written.append(REAL_WRITE(fd, bytes(data[:len(data) // 2])))
        return written[-1]

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(OSError) as failed:
        ledger.append(WarningEvent(message="lost to a full disk"))
    monkeypatch.undo()
    assert failed.value.errno == errno.ENOSPC and failed.value.filename == str(ledger.path)
    assert "cannot write" in str(failed.value) and "No space left" in str(failed.value)
    assert ledger.path.name in str(failed.value)  # named relative to its campaign
    assert written and clean(ledger.path)  # half a line was written, and cut again
    ledger.append(QueueResumed())
    assert seqs(ledger.path) == [1, 2]  # the failed event took no seq


def test_when_the_cut_fails_too_the_next_append_cuts_first(tmp_path, monkeypatch):
    ledger = Ledger(tmp_path / "ledger.jsonl", clock=lambda: 1.0)
    ledger.append(QueuePaused())

    def half_then_fail(fd, data):
        REAL_WRITE(fd, bytes(data[:10]))
        raise OSError(errno.EIO, "Input/output error")

    def no_truncate(fd, size):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "write", half_then_fail)
    monkeypatch.setattr(os, "ftruncate", no_truncate)
    with pytest.raises(OSError, match="cannot append the warning event to the ledger"):
        ledger.append(WarningEvent(message="x"))
    monkeypatch.undo()
    assert read_ledger_report(ledger.path).torn_tail_bytes == 10  # still parseable
    ledger.append(QueueResumed())
    assert clean(ledger.path) and seqs(ledger.path) == [1, 2]


def test_open_cuts_a_torn_tail_and_keeps_a_whole_event_that_lost_its_newline(tmp_path):
    path = tmp_path / "ledger.jsonl"
    whole = encode_line({"seq": 1, "t": 1.0, "event": "queue_paused"})
    path.write_bytes(whole + encode_line({"seq": 2, "t": 1.0, "event": "queue_resumed"})[:-1])
    ledger = Ledger(path, clock=lambda: 2.0)
    assert ledger.cut_tail == 0 and seqs(path) == [1, 2]  # newline restored, event kept
    path.write_bytes(whole + b'{"seq": 2, "t": 1.0, "ev')
    ledger = Ledger(path, clock=lambda: 2.0)
    assert ledger.cut_tail == len(b'{"seq": 2, "t": 1.0, "ev') and path.read_bytes() == whole
    ledger.append(QueueResumed())
    assert clean(path) and seqs(path) == [1, 2]


@pytest.fixture
def tiny_disk(tmp_path):
    mount = tmp_path / "disk"
    mount.mkdir()
    try:
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                              capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs to fill: {exc}")
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not permitted here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, timeout=20)


def fill(directory):
    """Write a filler file until the disk is full; returns its path."""
    filler = directory / f"filler-{uuid.uuid4().hex}"
    with open(filler, "wb", buffering=0) as f:
        chunk = b"\1" * 4096
        try:
            while True:
                f.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    for size in (1024, 64, 1):  # and the last bytes of its last page
        with open(filler, "ab", buffering=0) as f:
            try:
                while True:
                    f.write(b"\1" * size)
            except OSError:
                pass
    return filler


@pytest.mark.slow
def test_a_full_disk_fails_appends_clearly_and_the_ledger_stays_whole(tiny_disk):
    path = tiny_disk / ".itera" / "ledger.jsonl"
    ledger = Ledger(path, clock=lambda: 1.0)
    for i in range(3):
        ledger.append(WarningEvent(message=f"before the disk filled {i}"))
    filler = fill(tiny_disk)
    appended, failure = 3, None
    for i in range(2000):  # the ledger's last page may still hold a few lines
        try:
            ledger.append(WarningEvent(message=f"filling {i} " + "x" * 200))
            appended += 1
        except OSError as exc:
            failure = exc
            break
    assert failure is not None and failure.errno == errno.ENOSPC
    assert ".itera/ledger.jsonl" in str(failure) and "No space left on device" in str(failure)
    assert clean(path) and seqs(path) == list(range(1, appended + 1))
    again = Ledger(path, clock=lambda: 2.0)  # a restart on the full disk opens and reads
    with pytest.raises(OSError, match="cannot append the warning event"):
        again.append(WarningEvent(message="after the restart " + "x" * 400))
    assert clean(path)
    filler.unlink()  # space freed: the same ledger goes on, one seq after the other
    again.append(WarningEvent(message="after the restart " + "x" * 400))
    report = read_ledger_report(path)
    assert report.damage == () and report.torn_tail_bytes == 0
    assert [ev["seq"] for ev in report.events] == list(range(1, appended + 2))


def test_an_event_is_checked_when_written_not_only_when_read(tmp_path):
    """Every kind the engine writes has a schema, and a line that a replay would refuse
    is never written: the mistake is ours and surfaces at once, at its source."""
    import pytest

    from tui.engine.ledger.file import Ledger, read_ledger

    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path, lambda: 1.7e9)
    with pytest.raises(TypeError, match="takes the event classes of ledger.events"):
        ledger.append({"event": "made_up_event", "run": "r"})
    with pytest.raises(ValueError, match="field 'exit_code' must be"):
        ledger.append(RunExited(run="r", exit_code="zero"))
    ledger.append(ClockStepped(by_s=3600.0, wall_before=1.7e9, note="NTP"))
    ledger.append(RunLeftovers(run="r", signal="SIGTERM", grace_s=5.0,
                  processes=[{"pid": 4321, "name": "python", "command": "x", "how": "env"}]))
    assert [e["event"] for e in read_ledger(path)] == ["clock_stepped", "run_leftovers"]


def test_a_listener_that_fails_never_fails_the_producer_and_is_said(tmp_path):
    """The socket's encoder once raised on an inf pilot loss and the engine's tick failed
    after the line was written; a listener's failure is now kept for the engine to say,
    the event is recorded and folded, and the next listener still hears it."""
    from tui.engine.ledger.journal import Journal

    journal = Journal(tmp_path / "ledger.jsonl", lambda: 1.7e9)
    journal.open()
    heard = []

    def broken(ev):
        raise ValueError("Out of range float values are not JSON compliant")

    journal.subscribe(broken)
    journal.subscribe(heard.append)
    ev = journal.record(QueuePaused())
    assert heard == [ev] and journal.state.paused
    (failure,) = journal.take_listener_failures()
    assert "failed on queue_paused: ValueError: Out of range float" in failure
    assert journal.take_listener_failures() == []


def test_appends_keep_the_file_open_yet_follow_a_file_replaced_or_cut_under_them(
        tmp_path, monkeypatch):
    """The file is opened once, not at every append (a third of an append's CPU beside
    its fsync); a file replaced, removed or truncated under the ledger is still where
    the next line goes, as when every append opened the path."""
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path, clock=lambda: 1.0)
    opened = []
    real_open = os.open
    monkeypatch.setattr(os, "open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    for _ in range(5):
        ledger.append(QueuePaused())
    assert opened == [path] and seqs(path) == [1, 2, 3, 4, 5]

    path.rename(tmp_path / "old.jsonl")  # replaced: the next line goes to the new file
    path.write_bytes(encode_line({"seq": 1, "t": 1.0, "event": "queue_paused"}))
    ledger.append(QueueResumed())
    assert seqs(path) == [1, 6] and seqs(tmp_path / "old.jsonl") == [1, 2, 3, 4, 5]

    path.unlink()  # removed: made again, as an append always did
    ledger.append(QueuePaused())
    assert seqs(path) == [7]

    with open(path, "r+b") as f:  # truncated: the line starts at the new end, no hole
        f.truncate(0)
    ledger.append(QueueResumed())
    assert path.read_bytes().startswith(b'{"seq": 8') and seqs(path) == [8]
    assert len(opened) == 3  # once, then once per file replaced or removed
    ledger.close()


def test_a_ledger_made_read_only_under_an_open_file_is_opened_again_and_refused(
        tmp_path, monkeypatch):
    """A change of mode (or owner) makes the next append open the path again, so a
    ledger made unwritable is refused as when every append opened it."""
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path, clock=lambda: 1.0)
    ledger.append(QueuePaused())
    real_open = os.open

    def refuse_read_only(file, flags, *args):
        if os.stat(file).st_mode & 0o222 == 0:  # as a user without root's override
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, flags, *args)

    monkeypatch.setattr(os, "open", refuse_read_only)
    path.chmod(0o444)
    with pytest.raises(OSError) as refused:
        ledger.append(QueueResumed())
    path.chmod(0o644)
    assert refused.value.errno == errno.EACCES and seqs(path) == [1]
    ledger.append(QueueResumed())
    assert seqs(path) == [1, 2]
