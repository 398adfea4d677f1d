"""A run's large text log is scrubbed into the bundle a piece at a time.

Before: a text file up to 256 MB was read whole, decoded and rewritten in
memory (three copies of it), so the wrap-up of a run that flooded its stdout
for 20 s peaked over 300 MB (`python bench/flood_bench.py --wrapup`). Now it
is read in pieces that end at a newline (no path spans one): the bytes
written, the redaction and both hashes are the same whatever the piece size.
"""

from __future__ import annotations

import hashlib

from tui.bundle import stage
from tui.bundle.paths import LogRedactor, Scrubber


def test_pieces_of_any_size_give_the_same_scrubbed_copy_and_hashes(tmp_path, monkeypatch):
    camp = tmp_path / "camp"
    camp.mkdir()
    text = "".join(f"line {i} é 日本 {camp}/train.py {'y' * (i % 90)}\n" for i in range(500))
    text += "a last line without its newline é" * 40
    src = tmp_path / "stdout.log"
    src.write_text(text)
    copies = []
    for chunk in (64, 1 << 20):  # 64 bytes: hundreds of piece boundaries
        monkeypatch.setattr(stage, "CHUNK", chunk)
        out = tmp_path / f"bundle{chunk}"
        out.mkdir()
        entry = stage.Stager(out, Scrubber(camp), LogRedactor(camp)).copy(
            src, "runs/r/stdout.log", "log", "r")
        copies.append(((out / "runs" / "r" / "stdout.log").read_bytes(), entry))
    (small, small_entry), (large, large_entry) = copies
    assert small == large and small_entry == large_entry
    assert str(camp).encode() not in large and "日本".encode() in large
    assert large_entry.redacted and large_entry.sha256 == hashlib.sha256(large).hexdigest()
    assert large_entry.source_sha256 == hashlib.sha256(src.read_bytes()).hexdigest()


def test_a_file_that_is_not_text_throughout_is_copied_as_it_is(tmp_path, monkeypatch):
    monkeypatch.setattr(stage, "CHUNK", 64)
    camp = tmp_path / "camp"
    camp.mkdir()
    src = tmp_path / "stdout.log"
    src.write_bytes((f"{camp}/x\n" * 50).encode() + b"\xff\xfe binary tail\n")
    out = tmp_path / "bundle"
    out.mkdir()
    entry = stage.Stager(out, Scrubber(camp), LogRedactor(camp)).copy(
        src, "runs/r/stdout.log", "log", "r")
    assert (out / "runs" / "r" / "stdout.log").read_bytes() == src.read_bytes()
    assert not entry.redacted and entry.source_sha256 is None


def test_a_text_file_whose_head_ends_inside_a_character_is_still_scrubbed(tmp_path):
    """The text sniff reads a file's first 4096 bytes; a two-byte 'é' cut at that edge is
    not binary data. Before, such a log was copied unscrubbed (how long the campaign's
    path was decided where the cut fell: under xdist the test above leaked it)."""
    camp = tmp_path / "camp"
    camp.mkdir()
    first = f"{camp}/train.py\n"
    pad = 4095 - len(first.encode())
    text = first + "x" * pad + "é" + f"\nagain {camp}/train.py\n"
    assert text.encode()[4095:4097] == "é".encode()  # the head ends inside the é
    src = tmp_path / "stdout.log"
    src.write_text(text)
    out = tmp_path / "bundle"
    out.mkdir()
    entry = stage.Stager(out, Scrubber(camp), LogRedactor(camp)).copy(
        src, "runs/r/stdout.log", "log", "r")
    copied = (out / "runs" / "r" / "stdout.log").read_bytes()
    assert str(camp).encode() not in copied and copied.startswith(b"./train.py\n")
    assert entry.redacted
