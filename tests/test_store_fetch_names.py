"""`itera-tui fetch URL DIR` from a store whose manifest names files outside DIR
(`/abs/path`, `../X`): whoever can write to the store must not be able to write
any file the fetching user can. Every name is checked before the first file is
read: nothing is written, inside DIR or out, and the command says which names.
A file:// store, in process: the same fsspec path as any other store."""

from __future__ import annotations

import hashlib
import json

from tui.cli import main


def entry(path: str, data: bytes) -> dict:
    return {"path": path, "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest(),
            "kind": "artifact"}


def every_file(folder) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def test_a_hostile_manifest_makes_fetch_write_nothing_anywhere(tmp_path, capsys):
    store = tmp_path / "store/bundle"
    outside = tmp_path / "outside"
    absolute = outside / "abs.txt"  # named by its absolute path
    data = b"written by whoever can write to the bucket\n"
    # each name's object where the store would read it from, with its right hash: only
    # the name can stop it
    for at in (store / "ok.txt", store.parent / "X", store / str(absolute).lstrip("/")):
        at.parent.mkdir(parents=True, exist_ok=True)
        at.write_bytes(data)
    manifest = {"format": 1, "files": [entry("ok.txt", data), entry("../X", data),
                                       entry(str(absolute), data)]}
    (store / "manifest.json").write_text(json.dumps(manifest))
    before = every_file(tmp_path)
    dest = tmp_path / "fetched"

    code = main(["fetch", f"file://{store}", str(dest)])

    out = capsys.readouterr().out
    assert code == 1
    assert every_file(tmp_path) == before  # nothing written: not DIR, not outside it
    assert not absolute.exists() and not (tmp_path / "X").exists()
    assert "'../X': a name that leaves the bundle's folder" in out
    assert f"{str(absolute)!r}: a name that leaves the bundle's folder" in out
    assert "NOT verified at the store" in out


def test_a_manifest_of_safe_names_is_still_fetched_whole(tmp_path, capsys):
    store = tmp_path / "store/bundle"
    files = {"ok.txt": b"one\n", "runs/a/x.jsonl": b"two\n"}
    for rel, data in files.items():
        (store / rel).parent.mkdir(parents=True, exist_ok=True)
        (store / rel).write_bytes(data)
    (store / "manifest.json").write_text(json.dumps(
        {"format": 1, "runs": [],
         "files": [entry(rel, data) for rel, data in files.items()]}))
    dest = tmp_path / "fetched"
    assert main(["fetch", f"file://{store}", str(dest)]) == 0, capsys.readouterr().out
    assert every_file(dest) >= {"ok.txt", "runs/a/x.jsonl", "manifest.json"}
