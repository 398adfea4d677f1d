"""Read a bundle's manifest.json as hostile input: every field's type and shape checked.

`verify` is run on bundles that came from elsewhere; a manifest with
`"bytes": "5"`, `"runs": 5`, a directory where the file should be, or JSON
nested a hundred thousand levels deep must end in named problems and exit 1,
never a traceback, and a manifest that lists nothing (`{"files": []}`) proves
nothing, so it does not verify either. `read_manifest` returns the parsed
manifest (None when unusable) and every problem found, each with its place.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .stage import safe_relative

MANIFEST = "manifest.json"
MAX_BYTES = 64 << 20
MAX_DEPTH = 32
_HEX64 = re.compile(r"[0-9a-f]{64}")


def _depth(value, limit: int) -> int:
    """Nesting depth of a parsed JSON value, iteratively (stops counting past `limit`)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth > limit:
            return depth
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _kind(value) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), "a number")


def _file_problems(i: int, entry, seen: set[str]) -> list[str]:
    where = f"files[{i}]"
    if not isinstance(entry, dict):
        return [f"{where} is {_kind(entry)}, not an object"]
    out = []
    path = entry.get("path")
    if not isinstance(path, str) or not safe_relative(path):
        out.append(f"{where}.path is {path!r}: not a relative path inside the bundle")
    elif path in seen:
        out.append(f"{where}.path {path!r} is listed twice")
    else:
        seen.add(path)
    size = entry.get("bytes")
    if not _is_int(size) or size < 0:
        out.append(f"{where}.bytes is {size!r} ({_kind(size)}): not a whole number of bytes")
    for key in ("sha256", "source_sha256"):
        value = entry.get(key)
        if (key == "sha256" or value is not None) and not (
                isinstance(value, str) and _HEX64.fullmatch(value)):
            out.append(f"{where}.{key} is {str(value)[:80]!r}: not a sha256 (64 hex digits)")
    for key in ("kind", "run", "unit"):
        value = entry.get(key)
        if (key == "kind" or value is not None) and not isinstance(value, str):
            out.append(f"{where}.{key} is {_kind(value)}, not a string")
    unit = entry.get("unit")
    if isinstance(unit, str) and isinstance(path, str) and not (
            safe_relative(unit) and path.startswith(unit.rstrip("/") + "/")):
        out.append(f"{where}.unit {unit!r} is not a directory holding {path!r}")
    return out


def _runs_problems(manifest: dict) -> list[str]:
    out = []
    runs = manifest.get("runs")
    if runs is None:
        out.append("runs is missing: a bundle names the runs it holds")
    elif not isinstance(runs, list):
        out.append(f"runs is {_kind(runs)}, not a list of runs")
    else:
        for i, run in enumerate(runs):
            if not isinstance(run, dict):
                out.append(f"runs[{i}] is {_kind(run)}, not an object")
            elif not isinstance(run.get("id"), str) or not safe_relative(run["id"]) \
                    or "/" in run["id"]:
                out.append(f"runs[{i}].id is {run.get('id')!r}: not a run id")
    ids = manifest.get("run_ids")
    if ids is not None and not (isinstance(ids, list) and all(isinstance(x, str) for x in ids)):
        out.append(f"run_ids is {_kind(ids)}: not a list of run ids")
    for key, kind in (("omitted", list), ("code", dict), ("paths", dict), ("plan", dict)):
        if manifest.get(key) is not None and not isinstance(manifest[key], kind):
            out.append(f"{key} is {_kind(manifest[key])}, not {_kind(kind())}")
    return out


def read_manifest(root: Path) -> tuple[dict | None, list[str]]:
    """(manifest, problems): the manifest only when its shape can be trusted."""
    path = root / MANIFEST
    if path.is_symlink():
        return None, ["a symbolic link, not the bundle's manifest"]
    if path.is_dir():
        return None, ["a directory, not a file: nothing can be checked without the manifest"]
    if not path.exists():
        return None, ["missing: nothing can be checked without the manifest"]
    try:
        if path.stat().st_size > MAX_BYTES:
            return None, [f"over {MAX_BYTES >> 20} MB: not a manifest this tool wrote"]
        text = path.read_text(encoding="utf-8")
        manifest = json.loads(text)
    except RecursionError:
        return None, [f"nested too deeply (over {MAX_DEPTH} levels): not a manifest"]
    except UnicodeDecodeError:
        return None, ["unreadable: not UTF-8 text"]
    except ValueError as error:
        return None, [f"unreadable: not JSON ({error})"]
    except OSError as error:
        return None, [f"unreadable: {error.strerror or error}"]
    if _depth(manifest, MAX_DEPTH) > MAX_DEPTH:
        return None, [f"nested too deeply (over {MAX_DEPTH} levels): not a manifest"]
    if not isinstance(manifest, dict):
        return None, [f"unreadable: {_kind(manifest)}, not a JSON object with a 'files' list"]
    files = manifest.get("files")
    if not isinstance(files, list):
        return None, [f"files is {_kind(files) if 'files' in manifest else 'missing'}: "
                      "not a JSON object with a 'files' list"]
    problems, seen = [], set()
    for i, entry in enumerate(files):
        problems += _file_problems(i, entry, seen)
    if not files:
        problems.append("lists no files: an empty bundle proves nothing")
    problems += _runs_problems(manifest)
    return manifest, problems
