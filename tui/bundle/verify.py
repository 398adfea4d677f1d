"""`itera-tui verify BUNDLE [--json]`: is this bundle a verified output?

A bundle is verified only if every check passes: every expected run is there
(from the manifest's run list, stops.json and the ledger copy), no file is
empty, every file matches the manifest's size and sha256, nothing unlisted
was added, no text file mentions a temporary directory or an absolute path
of this machine, and every checkpoint and artifact reloads in a fresh
process. Each failure is named with its path and problem; exit status 1.
The wrap-up runs the same function on the bundle it has just built.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from .paths import find_machine_paths, is_text, machine_needles
from .reload import reload_many
from ..campaign.files import sha256_file
from .stage import safe_relative

MANIFEST = "manifest.json"
RELOADABLE = ("checkpoint", "artifact")
SCAN_LIMIT = 256 << 20
HASH_CACHE_MIN = 1 << 20


@dataclass(frozen=True)
class VerifyResult:
    verified: bool
    failures: list[dict]
    checked: int
    reloaded: int = 0
    runs: list[str] = field(default_factory=list)
    bundle: str = ""

    def to_dict(self) -> dict:
        return {"verified": self.verified, "failures": self.failures, "checked": self.checked,
                "reloaded": self.reloaded, "runs": self.runs, "bundle": self.bundle}


class _Checks:
    def __init__(self, root: Path):
        self.root = root
        self.failures: list[dict] = []

    def fail(self, path: str, problem: str) -> None:
        self.failures.append({"path": path, "problem": problem})


def _walk(root: Path) -> dict[str, Path]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = Path(dirpath) / name
            found[full.relative_to(root).as_posix()] = full
    return found


def _expected_runs(root: Path, manifest: dict, checks: _Checks) -> dict[str, str]:
    """run id -> where it is named."""
    expected: dict[str, str] = {}
    for r in manifest.get("runs") or []:
        if isinstance(r, dict) and r.get("id"):
            expected.setdefault(str(r["id"]), "the manifest")
    stops = root / "stops.json"
    if stops.is_file():
        try:
            for s in json.loads(stops.read_text()):
                expected.setdefault(str(s["id"]), "stops.json")
        except (ValueError, TypeError, KeyError):
            checks.fail("stops.json", "unreadable: not a JSON list of stops with ids")
    ledger = root / "ledger.jsonl"
    if ledger.is_file():
        for line in ledger.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if isinstance(ev, dict) and ev.get("event") == "run_launched" and ev.get("run"):
                expected.setdefault(str(ev["run"]), "the ledger copy")
    return expected


def verify_bundle(path: Path, *, reload: bool = True, progress: Callable[[str], None] | None
                  = None, reload_cache: dict | None = None) -> VerifyResult:
    """Check a bundle directory. `reload_cache` spares the wrap-up, which checks its
    bundle more than once while writing it, a second hash or reload of a file it
    has already checked unchanged ((path, sha256) -> reload verdict, and hashes)."""
    root = Path(path)
    checks = _Checks(root)
    if not root.is_dir():
        checks.fail(".", "no such bundle directory")
        return VerifyResult(False, checks.failures, 0, bundle=str(path))
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        listed_raw = manifest["files"]
        assert isinstance(listed_raw, list)
    except FileNotFoundError:
        checks.fail(MANIFEST, "missing: nothing can be checked without the manifest")
        return VerifyResult(False, checks.failures, 0, bundle=str(path))
    except (ValueError, KeyError, TypeError, AssertionError):
        checks.fail(MANIFEST, "unreadable: not a JSON object with a 'files' list")
        return VerifyResult(False, checks.failures, 0, bundle=str(path))
    listed: dict[str, dict] = {}
    for entry in listed_raw:
        rel = entry.get("path") if isinstance(entry, dict) else None
        if not isinstance(rel, str) or not safe_relative(rel):
            checks.fail(MANIFEST, f"bad file entry {entry!r}: not a relative path inside "
                                  "the bundle")
            continue
        listed[rel] = entry
    found = _walk(root)
    expected = _expected_runs(root, manifest, checks)
    missing_runs = set()
    for rid, source in sorted(expected.items()):
        run_dir = root / "runs" / rid
        if not run_dir.is_dir() or not any(run_dir.iterdir()):
            missing_runs.add(rid)
            checks.fail(f"runs/{rid}", f"expected run {rid} (named by {source}) is missing")
    for rel, full in sorted(found.items()):
        if full.is_symlink():
            checks.fail(rel, "symbolic link (a bundle holds plain files only)")
        elif full.stat().st_size == 0:
            checks.fail(rel, "empty file (0 bytes)")
        if rel != MANIFEST and rel not in listed:
            checks.fail(rel, "not listed in the manifest (added after the bundle was built)")
    for rel, entry in sorted(listed.items()):
        full = found.get(rel)
        if full is None:
            parts = rel.split("/")
            if not (len(parts) > 2 and parts[0] == "runs" and parts[1] in missing_runs):
                checks.fail(rel, "listed in the manifest but missing")
            continue
        if full.is_symlink() or not full.is_file():
            continue
        size = full.stat().st_size
        if size != entry.get("bytes"):
            how = "truncated" if size < (entry.get("bytes") or 0) else "grown"
            checks.fail(rel, f"{how}: {size} bytes, the manifest says {entry.get('bytes')}")
            continue
        digest = _hash(rel, full, reload_cache)
        entry["_actual_sha256"] = digest
        if digest != entry.get("sha256"):
            checks.fail(rel, "sha256 mismatch: the content changed since the bundle was built")
    _scan_paths(root, found, checks)
    reloaded = _reload(root, listed, found, checks, reload, progress, reload_cache) \
        if reload else 0
    return VerifyResult(not checks.failures, checks.failures, len(found), reloaded,
                        sorted(expected), str(path))


def _hash(rel: str, full: Path, cache: dict | None) -> str:
    """sha256 of a file; with a cache, an unchanged big file (size, mtime) is hashed
    once (small ones, like the report being rewritten, are always hashed again)."""
    st = full.stat()
    key = ("sha256", rel, st.st_size, st.st_mtime_ns)
    if st.st_size < HASH_CACHE_MIN:
        cache = None
    if cache is not None and key in cache:
        return cache[key]
    digest, _ = sha256_file(full)
    if cache is not None:
        cache[key] = digest
    return digest


def _scan_paths(root: Path, found: dict[str, Path], checks: _Checks) -> None:
    needles = machine_needles(root)
    for rel, full in sorted(found.items()):
        if full.is_symlink() or not full.is_file() or full.stat().st_size > SCAN_LIMIT:
            continue
        data = full.read_bytes()
        if not is_text(data):
            continue
        for problem in find_machine_paths(data.decode("utf-8"), needles):
            checks.fail(rel, problem)


def _reload(root, listed, found, checks, reload, progress, cache) -> int:
    todo, cached = [], {}
    for rel, entry in sorted(listed.items()):
        if entry.get("kind") not in RELOADABLE or rel not in found:
            continue
        key = (rel, entry.get("_actual_sha256"))
        if cache is not None and key[1] and key in cache:
            cached[rel] = cache[key]
        else:
            todo.append(found[rel])
    results = reload_many(todo, progress, label=lambda p: p.relative_to(root).as_posix())
    verdicts = dict(cached)
    for full, verdict in results.items():
        rel = full.relative_to(root).as_posix()
        verdicts[rel] = verdict
        sha = listed[rel].get("_actual_sha256")
        if cache is not None and sha:
            cache[(rel, sha)] = verdict
    for rel, verdict in sorted(verdicts.items()):
        if not verdict.get("ok"):
            checks.fail(rel, f"does not reload in a fresh process: {verdict.get('problem')}")
    return len(verdicts)


def verify_command(bundle: Path, as_json: bool = False) -> int:
    say = None if as_json else (lambda msg: print(f"  {msg}", file=sys.stderr, flush=True))
    result = verify_bundle(Path(bundle), progress=say)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    elif result.verified:
        print(f"VERIFIED {bundle}: {result.checked} files match the manifest, "
              f"{len(result.runs)} runs present, {result.reloaded} checkpoints/artifacts "
              "reloaded in a fresh process")
    else:
        print(f"NOT VERIFIED {bundle}: {len(result.failures)} failure"
              f"{'s' if len(result.failures) != 1 else ''}")
        for f in result.failures:
            print(f"  FAIL {f['path']}: {f['problem']}")
    if not Path(bundle).is_dir():
        return 2
    return 0 if result.verified else 1
