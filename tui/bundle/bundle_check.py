"""`itera-tui verify BUNDLE [--json]`: is this bundle a verified output?

A bundle is verified only if every check passes: the manifest has the shape
this tool writes (manifest_check), every expected run is there (from the
manifest's run list, stops.json and the ledger copy) and there is at least
one, no file is empty or a symbolic link, every file matches the manifest's
size and sha256, nothing unlisted was added (Python's bytecode caches are
named as extra, a warning: see _added), no text file the bundle itself
wrote mentions a temporary directory or an absolute path of this machine
(a run's captured logs are evidence and exempt), and every checkpoint and
artifact reloads, all in one fresh process. A file that reloads with weights
holding NaN or inf is a faithful copy, so not a failure of the bundle, but it
is never "ok": it is listed apart (`non_finite`) and named in every view.
Each failure is named with its path and problem; exit status 1. The wrap-up runs the same function on the
bundle it has just built.
"""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..campaign.files import file_kind, sha256_file
from ..engine.ledger.events import RunLaunched, parse
from . import verify_text
from .manifest_check import MANIFEST, read_manifest
from .paths import command_paths, find_machine_paths, is_text, machine_needles
from .reload_check import Reloader, Target
from .stage import safe_relative

RELOADABLE = ("checkpoint", "artifact")
CODE_DIR = "code"
SCAN_LIMIT = 256 << 20
HASH_CACHE_MIN = 1 << 20
LOG_NAMES = ("stdout.log", "stderr.log")


@dataclass(frozen=True)
class VerifyResult:
    verified: bool
    failures: list[dict]
    checked: int
    reloaded: int = 0
    runs: list[str] = field(default_factory=list)
    bundle: str = ""
    added: list[dict] = field(default_factory=list)  # beside the bundle: warnings, see _added
    non_finite: list[dict] = field(default_factory=list)  # {"path", "problem"}: NaN weights

    def to_dict(self) -> dict:
        return {"verified": self.verified, "failures": self.failures, "checked": self.checked,
                "reloaded": self.reloaded, "runs": self.runs, "bundle": self.bundle,
                "added": self.added, "non_finite": self.non_finite}


class _Checks:
    def __init__(self, root: Path):
        self.root = root
        self.failures: list[dict] = []
        self.non_finite: list[dict] = []

    def fail(self, path: str, problem: str) -> None:
        self.failures.append({"path": path, "problem": problem})


def _walk(root: Path) -> dict[str, Path]:
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]:
            full = Path(dirpath) / name
            found[full.relative_to(root).as_posix()] = full
    return found


def _run_id(value) -> str | None:
    return value if isinstance(value, str) and safe_relative(value) and "/" not in value \
        else None


def _expected_runs(root: Path, manifest: dict, checks: _Checks) -> dict[str, str]:
    """run id -> where it is named."""
    expected: dict[str, str] = {}
    for r in manifest.get("runs") if isinstance(manifest.get("runs"), list) else []:
        if isinstance(r, dict) and _run_id(r.get("id")):
            expected.setdefault(r["id"], "the manifest")
    stops = root / "stops.json"
    if stops.is_file() and not stops.is_symlink():
        try:
            for s in json.loads(stops.read_text()):
                if _run_id(s["id"]):
                    expected.setdefault(s["id"], "stops.json")
        except (ValueError, TypeError, KeyError, RecursionError, OSError):
            checks.fail("stops.json", "unreadable: not a JSON list of stops with ids")
    ledger = root / "ledger.jsonl"
    if ledger.is_file() and not ledger.is_symlink():
        for line in ledger.read_text(errors="replace").splitlines():
            try:  # a bundle's ledger is text from elsewhere: read as the engine reads it
                ev = parse(json.loads(line))
            except (ValueError, RecursionError, KeyError, TypeError, AttributeError):
                continue
            if isinstance(ev, RunLaunched) and _run_id(ev.run):
                expected.setdefault(ev.run, "the ledger copy")
    return expected


def _left_behind(manifest: dict) -> set[str]:
    """Runs the manifest says were cut on a box the campaign moved away from with nothing
    of them in its store (`left_behind`, written by the wrap-up): their folder is not
    expected. A run named so whose folder is there is checked as any other."""
    runs = manifest.get("runs") if isinstance(manifest.get("runs"), list) else []
    return {r["id"] for r in runs if isinstance(r, dict) and _run_id(r.get("id"))
            and isinstance(r.get("left_behind"), str) and r["left_behind"]}


def verify_bundle(path: Path, *, reload: bool = True, progress: Callable[[str], None] | None
                  = None, reload_cache: dict | None = None,
                  reloader: Reloader | None = None) -> VerifyResult:
    """Check a bundle directory. `reload_cache` spares the wrap-up, which checks its
    bundle more than once while writing it, a second hash or reload of a file it
    has already checked unchanged ((path, sha256) -> reload verdict, and hashes).
    `reloader`: the verifier process to use (one is started and reaped if None)."""
    root = Path(path)
    checks = _Checks(root)
    if not root.is_dir():
        checks.fail(".", "the folder does not exist" if not root.exists()
                    else "not a folder")
        return VerifyResult(False, checks.failures, 0, bundle=str(path))
    manifest, problems = read_manifest(root)
    for problem in problems:
        checks.fail(MANIFEST, problem)
    if manifest is None:
        return VerifyResult(False, checks.failures, 0, bundle=str(path))
    listed = {e["path"]: e for e in manifest["files"] if isinstance(e, dict)
              and isinstance(e.get("path"), str) and safe_relative(e["path"])}
    own = None
    if reload and reloader is None and any(e.get("kind") in RELOADABLE or e.get("unit")
                                           for e in listed.values()):
        own = reloader = Reloader()
        reloader.client.start()  # torch imports in the verifier while this process hashes
    try:
        return _verify(root, manifest, listed, checks, reload, progress, reload_cache,
                       reloader, str(path))
    finally:
        if own is not None:
            own.close()


def _added(found: dict[str, Path], listed: dict) -> tuple[dict[str, Path], list[dict]]:
    """Tell what a person put beside the bundle from what was changed inside it.

    A file or folder whose top-level name no manifest entry has (`corpus/` next to
    RELOAD.md, as it says to do; a `notes.txt`) is not part of the bundle: it is
    named as a warning and neither read nor followed. A file not listed under a
    name the manifest does use (`runs/ID/extra.pt`, `code/x.py`) is among the
    bundle's own files: that stays a failure, as a changed or missing file does.
    Python's bytecode cache (`code/**/__pycache__/*.pyc`, written by importing
    the bundle's code with caching on, as an older RELOAD.md snippet did) is no
    one's tampering: it is named as extra, a warning, and never read (the
    verifier imports code/ with its own empty cache, `training.pickled`)."""
    tops = {rel.split("/", 1)[0] for rel in listed} | {MANIFEST}
    kept, beside, caches = {}, {}, {}
    for rel, full in found.items():
        top = rel.split("/", 1)[0]
        cache = _bytecode_cache(rel, full, listed)
        if cache:
            caches.setdefault(cache, []).append(rel)
        elif top in tops:
            kept[rel] = full
        else:
            beside.setdefault(top, []).append(rel)
    added = [{"path": top + ("/" if len(rels) > 1 or rels[0] != top else ""),
              "files": len(rels),
              "note": "added beside the bundle (no manifest entry has this name): not "
                      "part of it, not checked"}
             for top, rels in sorted(beside.items())]
    added += [{"path": folder + "/", "files": len(rels), "note": BYTECODE_NOTE}
              for folder, rels in sorted(caches.items())]
    return kept, added


BYTECODE_NOTE = ("written by Python as its bytecode cache when the bundle's code was "
                 "imported: extra, not part of the bundle, not read, safe to delete")


def _bytecode_cache(rel: str, full: Path, listed: dict) -> str | None:
    """The `__pycache__` folder holding rel when rel is an unlisted plain `.pyc` file
    straight inside one; None otherwise (a listed file, or anything else, is checked)."""
    folder, _, name = rel.rpartition("/")
    if rel in listed or not name.endswith(".pyc") or folder.rpartition("/")[2] != "__pycache__":
        return None
    return folder if stat.S_ISREG(full.lstat().st_mode) else None


def _verify(root, manifest, listed, checks, reload, progress, reload_cache, reloader,
            shown) -> VerifyResult:
    found, added = _added(_walk(root), listed)
    expected = _expected_runs(root, manifest, checks)
    if not expected:
        checks.fail(MANIFEST, "holds no run: a bundle with nothing run proves nothing")
    missing_runs = set()
    away = _left_behind(manifest)
    for rid, source in sorted(expected.items()):
        run_dir = root / "runs" / rid
        if rid in away and not (run_dir.exists() or run_dir.is_symlink()):
            continue  # cut on a box that is gone, nothing of it reached this one: said so
        if not run_dir.is_dir() or run_dir.is_symlink() or not any(run_dir.iterdir()):
            missing_runs.add(rid)
            checks.fail(f"runs/{rid}", f"expected run {rid} (named by {source}) is missing")
    for rel, full in sorted(found.items()):
        mode = full.lstat().st_mode
        if stat.S_ISLNK(mode):
            checks.fail(rel, "symbolic link (a bundle holds plain files only; not followed)")
        elif not stat.S_ISREG(mode):
            checks.fail(rel, f"not a regular file ({file_kind(mode)}): not read")
        elif full.stat().st_size == 0:
            checks.fail(rel, "empty file (0 bytes)")
        if rel != MANIFEST and rel not in listed:
            checks.fail(rel, "not listed in the manifest (added after the bundle was built)")
    hashed = _check_listed(listed, found, missing_runs, checks, reload_cache)
    _scan_paths(found, listed, checks, machine_needles(root))
    reloaded = 0
    if reload:
        reloaded = _reload(root, listed, hashed, checks, progress, reload_cache, reloader)
    return VerifyResult(not checks.failures, checks.failures, len(found), reloaded,
                        sorted(expected), shown, added, non_finite=checks.non_finite)


def _check_listed(listed, found, missing_runs, checks, cache) -> dict[str, str]:
    """Size and sha256 of every listed file; rel -> its actual sha256 when it matched."""
    hashed = {}
    for rel, entry in sorted(listed.items()):
        full = found.get(rel)
        if full is None:
            parts = rel.split("/")
            if not (len(parts) > 2 and parts[0] == "runs" and parts[1] in missing_runs):
                checks.fail(rel, "listed in the manifest but missing")
            continue
        if full.is_symlink() or not full.is_file():
            continue
        size, want = full.stat().st_size, entry.get("bytes")
        if size != want:
            how = "truncated" if isinstance(want, int) and size < want else "grown"
            checks.fail(rel, f"{how}: {size} bytes, the manifest says {want}")
            continue
        digest = _hash(rel, full, cache)
        if digest != entry.get("sha256"):
            checks.fail(rel, "sha256 mismatch: the content changed since the bundle was built")
            continue
        hashed[rel] = digest
    return hashed


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


def _is_log(rel: str, entry: dict | None) -> bool:
    """A run's captured stdout/stderr, or the ledger copy: evidence of what happened,
    kept as it was written with this machine's paths redacted, never a failure."""
    parts = rel.split("/")
    if entry is None:
        return False
    if rel == "ledger.jsonl":
        return entry.get("kind") == "ledger"
    return (entry.get("kind") == "log" and len(parts) == 3 and parts[0] == "runs"
            and parts[2] in LOG_NAMES)


def _scan_paths(found: dict[str, Path], listed: dict, checks: _Checks, needles) -> None:
    provenance = command_paths(found, listed)
    for rel, full in sorted(found.items()):
        if full.is_symlink() or not full.is_file() or full.stat().st_size > SCAN_LIMIT:
            continue
        if _is_log(rel, listed.get(rel)):
            continue
        data = full.read_bytes()
        if not is_text(data):
            continue
        text = data.decode("utf-8")
        for pattern in provenance:
            text = pattern.sub("<command path>", text)
        for problem in find_machine_paths(text, needles):
            checks.fail(rel, problem)


def reload_targets(root: Path, listed: dict, hashed: dict[str, str]) -> list[Target]:
    """Files of kind checkpoint/artifact, and checkpoint directories (`unit`) once each."""
    targets, units = [], set()
    for rel, entry in sorted(listed.items()):
        unit = entry.get("unit")
        if isinstance(unit, str):
            if unit not in units and (root / unit).is_dir() and not (root / unit).is_symlink():
                units.add(unit)
                targets.append(Target(unit, root / unit))
        elif entry.get("kind") in RELOADABLE and (root / rel).is_file() \
                and not (root / rel).is_symlink():
            targets.append(Target(rel, root / rel, hashed.get(rel)))
    return targets


def _reload(root, listed, hashed, checks, progress, cache, reloader) -> int:
    todo, verdicts = [], {}
    for target in reload_targets(root, listed, hashed):
        key = (target.rel, target.known_sha256 if target.rel in hashed
               else _unit_key(target.rel, listed, hashed))
        if cache is not None and key in cache:
            verdicts[target.rel] = cache[key]
        else:
            todo.append((key, target))
    code_dir = root / CODE_DIR
    code_dir = code_dir if code_dir.is_dir() and not code_dir.is_symlink() else None
    if todo:
        own = reloader is None
        reloader = reloader or Reloader()
        try:
            fresh = reloader.many([t for _, t in todo], code_dir, progress)
        finally:
            if own:
                reloader.close()
        for key, target in todo:
            verdict = fresh.get(target.rel) or {"ok": False, "problem": "no verdict"}
            verdicts[target.rel] = verdict
            if cache is not None and key[1]:
                cache[key] = verdict
    for rel, verdict in sorted(verdicts.items()):
        if verdict.get("non_finite"):
            checks.non_finite.append({"path": rel, "problem": verdict.get("problem")})
        elif not verdict.get("ok"):
            checks.fail(rel, f"does not reload in a fresh process: {verdict.get('problem')}")
    return len(verdicts)


def _unit_key(unit: str, listed: dict, hashed: dict[str, str]) -> str | None:
    """A directory's cache key: every one of its files hashed and matching, or None."""
    files = sorted(rel for rel, e in listed.items() if e.get("unit") == unit)
    if not files or any(rel not in hashed for rel in files):
        return None
    return "|".join(hashed[rel] for rel in files)


def verify_command(bundle: Path, as_json: bool = False) -> int:
    if not Path(bundle).is_dir():  # a typo in the path is bad input, said as such
        what = "is a file, not a bundle folder" if Path(bundle).exists() else \
            "does not exist"
        text = (f"verify: {bundle}: the folder {what} (a bundle is the folder `itera-tui "
                "wrapup` writes: outputs/bundle by default)")
        if as_json:
            result = verify_bundle(Path(bundle), reload=False)
            print(json.dumps(result.to_dict() | {"error": text}, indent=2))
        else:
            print(f"itera-tui: {text}", file=sys.stderr)
        return 2
    say = None if as_json else (lambda msg: print(f"  {msg}", file=sys.stderr, flush=True))
    result = verify_bundle(Path(bundle), progress=say)
    if as_json:
        print(json.dumps(result.to_dict(), indent=2))
    else:
        print("\n".join(verify_text.lines(bundle, result)))
    if not Path(bundle).is_dir():
        return 2
    return 0 if result.verified else 1
