"""`python -m tui.training.verify PATH [--json]`: is this checkpoint or artifact usable?

Run in a fresh process before trusting a file for a resume or a bundle. Checks,
in order of cost: the file exists and is not empty, its sidecar exists, size and
sha256 match the sidecar (a flipped byte or a truncation is caught here, before
torch is even imported), it loads with ``weights_only=True``, and its structure
fits its kind. Prints one line (``OK ...`` or ``FAIL <path>: <reason>``) and
exits 0 or 1; never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from .atomic import FORMAT_VERSION, file_sha256, sidecar_path


class Problem(Exception):
    """What is wrong with the file, in words for the user."""


def _human(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _read_sidecar(path: Path) -> dict:
    side = sidecar_path(path)
    if not side.exists():
        raise Problem(f"sidecar {side.name} is missing (interrupted write, or not written by tui.training)")
    try:
        record = json.loads(side.read_text())
    except (OSError, ValueError) as error:
        raise Problem(f"sidecar {side.name} is unreadable: {error}") from None
    if not isinstance(record, dict) or not isinstance(record.get("sha256"), str) \
            or not isinstance(record.get("bytes"), int):
        raise Problem(f"sidecar {side.name} lacks sha256/bytes")
    return record


def _check_tensors(mapping, what: str) -> None:
    import torch

    if not isinstance(mapping, Mapping):
        raise Problem(f"{what} is a {type(mapping).__name__}, not a mapping of tensors")
    for key, value in mapping.items():
        if not isinstance(value, torch.Tensor):
            raise Problem(f"{what}[{key!r}] is a {type(value).__name__}, not a tensor")


def _check_structure(payload, expected_kind: str | None) -> tuple[str, int | None]:
    if not isinstance(payload, dict):
        raise Problem(f"content is a {type(payload).__name__}, not an itera checkpoint or artifact")
    kind = payload.get("itera_kind")
    if kind not in ("checkpoint", "artifact"):
        raise Problem(f"content has itera_kind={kind!r}, not 'checkpoint' or 'artifact'")
    if expected_kind is not None and kind != expected_kind:
        raise Problem(f"sidecar says {expected_kind} but the file holds a {kind}")
    version = payload.get("format_version")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise Problem(f"unsupported format_version {version!r} (this SDK reads up to {FORMAT_VERSION})")
    if kind == "artifact":
        _check_tensors(payload.get("state_dict"), "state_dict")
        if not isinstance(payload.get("meta"), dict):
            raise Problem("artifact meta is missing or not a dict")
        return kind, None
    step = payload.get("step")
    if not isinstance(step, int):
        raise Problem(f"checkpoint step is {step!r}, not an integer")
    _check_tensors(payload.get("model"), "model")
    optimizer = payload.get("optimizer")
    if optimizer is not None and not (isinstance(optimizer, dict) and "state" in optimizer
                                      and "param_groups" in optimizer):
        raise Problem("optimizer state lacks 'state'/'param_groups'")
    rng = payload.get("rng")
    if not isinstance(rng, dict) or not isinstance(rng.get("per_rank"), list) or not rng["per_rank"]:
        raise Problem("checkpoint holds no RNG states")
    return kind, step


def check(path: Path) -> dict:
    """Verify `path`; return the facts. Raises Problem with the reason."""
    if not path.exists():
        raise Problem("no such file")
    if not path.is_file():
        raise Problem("not a regular file")
    actual_size = path.stat().st_size
    if actual_size == 0:
        raise Problem("empty file (0 bytes)")
    record = _read_sidecar(path)
    if actual_size != record["bytes"]:
        verb = "truncated" if actual_size < record["bytes"] else "grown"
        raise Problem(f"{verb}: {actual_size} bytes on disk, sidecar says {record['bytes']}")
    digest, _ = file_sha256(path)
    if digest != record["sha256"]:
        raise Problem(f"sha256 mismatch: file is corrupted (got {digest[:12]}…, "
                      f"sidecar says {record['sha256'][:12]}…)")
    try:
        import torch
    except ImportError as error:
        raise Problem(f"torch is not importable here: {error}") from None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # any failure to load is the verdict, not a crash
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        raise Problem(f"not a loadable torch file (weights_only): {first[:300]}") from None
    kind, step = _check_structure(payload, record.get("kind"))
    if kind == "checkpoint" and record.get("step") is not None and record["step"] != step:
        raise Problem(f"sidecar says step {record['step']} but the file holds step {step}")
    return {"kind": kind, "step": step, "sha256": digest, "bytes": actual_size}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.training.verify",
                                     description="Verify an itera checkpoint or artifact.")
    parser.add_argument("path")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of a line")
    args = parser.parse_args(argv)
    try:
        sys.stdout.reconfigure(errors="replace")
    except (AttributeError, ValueError):
        pass
    path = Path(args.path)
    try:
        facts = check(path)
        problem = None
    except Problem as error:
        facts, problem = {}, str(error)
    except Exception as error:  # last resort: still one line, still exit 1
        facts, problem = {}, f"unexpected {type(error).__name__}: {error}"
    if args.json:
        print(json.dumps({"ok": problem is None, "path": args.path, "kind": facts.get("kind"),
                          "problem": problem, "step": facts.get("step"), "sha256": facts.get("sha256"),
                          "bytes": facts.get("bytes")}))
    elif problem is None:
        step = f" step={facts['step']}" if facts["kind"] == "checkpoint" else ""
        print(f"OK {facts['kind']}{step} sha256={facts['sha256'][:12]}… {_human(facts['bytes'])}")
    else:
        print(f"FAIL {args.path}: {problem}")
    return 0 if problem is None else 1


if __name__ == "__main__":
    sys.exit(main())
