"""`python -m tui.training.file_check PATH [--json]` / `--serve`: is this checkpoint usable?

Run in a fresh process (never the writer) before trusting a file for a resume
or a bundle. An SDK file is checked in order of cost: it exists and is not
empty, its sidecar exists, size and digest match the sidecar (a flipped byte or
a truncation is caught before torch is even imported), it loads with
``weights_only=True``, and its structure fits its kind. A file with no sidecar
(plain `torch.save`, Lightning, safetensors, an HF checkpoint directory) goes to
its format's loader (`loaders`). With PATH: one line (``OK ...`` or
``FAIL <path>: <reason>``), exit 0 or 1, never a traceback. With `--serve`: one
process answers many files, torch imported once (see `serve`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from .atomic import FORMAT_VERSION, file_digest, sidecar_digest, sidecar_path
from .digest import SHA256, DigestUnavailable, split
from .finite import NonFinite, non_finite_problem
from .loaders import (Facts, NonFiniteProblem, Problem, check_dir, check_file, first_line,
                      missing_sidecar)

__all__ = ["Facts", "Problem", "check", "main", "serve"]


def _human(n: int) -> str:
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _read_sidecar(path: Path) -> dict:
    side = sidecar_path(path)
    if not side.exists():
        raise missing_sidecar(path)
    try:
        record = json.loads(side.read_text())
    except (OSError, ValueError) as error:
        raise Problem(f"sidecar {side.name} is unreadable: {error}") from None
    if not isinstance(record, dict) or sidecar_digest(record) is None \
            or not isinstance(record.get("bytes"), int):
        raise Problem(f"sidecar {side.name} lacks a digest/bytes")
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


def check_sdk(path: Path, known_sha256: str | None = None) -> Facts:
    """An SDK checkpoint or artifact, against its sidecar. `known_sha256`: the caller
    has just hashed these bytes (the bundle check), so they are not hashed twice."""
    actual_size = path.stat().st_size
    record = _read_sidecar(path)
    if actual_size != record["bytes"]:
        verb = "truncated" if actual_size < record["bytes"] else "grown"
        raise Problem(f"{verb}: {actual_size} bytes on disk, sidecar says {record['bytes']}")
    recorded = sidecar_digest(record)  # "algorithm:hex"; first-format sidecars: sha256
    try:
        algorithm = split(recorded)[0]
        digest = (f"{SHA256}:{known_sha256}" if known_sha256 and algorithm == SHA256
                  else file_digest(path, algorithm)[0])
    except (ValueError, DigestUnavailable) as error:
        raise Problem(f"sidecar {sidecar_path(path).name}: {error}") from None
    if digest != recorded:
        raise Problem(f"{algorithm} mismatch: file is corrupted (got {digest[:21]}…, "
                      f"sidecar says {recorded[:21]}…)")
    sha256 = split(digest)[1] if algorithm == SHA256 else known_sha256
    try:
        import torch
    except ImportError as error:
        raise Problem(f"torch is not importable here: {error}") from None
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # any failure to load is the verdict, not a crash
        raise Problem(f"not a loadable torch file (weights_only): {first_line(error)}") from None
    kind, step = _check_structure(payload, record.get("kind"))
    problem = non_finite_problem(payload)
    if problem:
        raise NonFiniteProblem(problem)
    if kind == "checkpoint" and record.get("step") is not None and record["step"] != step:
        raise Problem(f"sidecar says step {record['step']} but the file holds step {step}")
    summary = f"{kind}" + (f" step={step}" if kind == "checkpoint" else "")
    return Facts("itera", kind, summary, step, sha256, actual_size)


def check(path: Path, code_dir: Path | None = None, known_sha256: str | None = None) -> Facts:
    """Verify `path` (a file or a checkpoint directory); return the facts. Raises
    Problem with the reason. `code_dir`: where the campaign's own classes live."""
    if not path.exists():
        raise Problem("no such file")
    if path.is_dir():
        return check_dir(path, code_dir)
    if not path.is_file():
        raise Problem("not a regular file")
    if path.stat().st_size == 0:
        raise Problem("empty file (0 bytes)")
    if sidecar_path(path).exists():
        return check_sdk(path, known_sha256)
    return check_file(path, code_dir, known_sha256)


def verdict(path: str, code_dir: str | None = None, known_sha256: str | None = None) -> dict:
    """The JSON verdict for one path: never raises."""
    start = time.perf_counter()
    non_finite = False
    try:
        facts, problem = check(Path(path), Path(code_dir) if code_dir else None,
                               known_sha256), None
    except Problem as error:
        facts, problem, non_finite = None, str(error), isinstance(error, NonFinite)
    except RecursionError:
        facts, problem = None, "nested too deeply to load"
    except Exception as error:  # last resort: still a verdict
        facts, problem = None, f"unexpected {type(error).__name__}: {first_line(error)}"
    out = {"ok": problem is None, "path": path, "problem": problem, "non_finite": non_finite,
           "elapsed_s": round(time.perf_counter() - start, 4)}
    for key in ("format", "kind", "summary", "step", "sha256", "bytes", "files"):
        out[key] = getattr(facts, key, None)
    out["needs"] = list(facts.needs) if facts else []
    out["notes"] = list(facts.notes) if facts else []
    if facts is not None and facts.adapter is not None:
        out["adapter"] = facts.adapter
    return out


def _answer(line: str) -> dict:
    try:
        request = json.loads(line)
    except (ValueError, RecursionError):
        return {"id": None, "ok": False, "problem": "request is not JSON"}
    if not isinstance(request, dict) or not isinstance(request.get("path"), str):
        return {"id": None, "ok": False, "problem": "request lacks a 'path' string"}
    if request.get("op") == "globals":
        try:
            from .loaders import needed_globals

            return {"id": request.get("id"), "ok": True, "path": request["path"],
                    "needs": needed_globals(Path(request["path"]))}
        except Exception as error:  # a file torch cannot list: no names, said so
            return {"id": request.get("id"), "ok": False, "path": request["path"],
                    "problem": first_line(error), "needs": []}
    code_dir, known = request.get("code_dir"), request.get("known_sha256")
    out = verdict(request["path"], code_dir if isinstance(code_dir, str) else None,
                  known if isinstance(known, str) else None)
    out["id"] = request.get("id")
    return out


def serve(stdin=None, stdout=None) -> int:
    """Answer one JSON request per line (`{"id", "path", "code_dir"?, "known_sha256"?}`,
    or `{"id", "path", "op": "globals"}`: the classes a pickle needs, nothing loaded)
    with one JSON verdict per line, flushed, until stdin closes; the first line,
    `{"ready": true}`, says torch is imported (per-file timeouts start there). The stream
    is the only thing on the real stdout: what torch or a campaign module prints
    goes to stderr."""
    if stdout is None:
        stdout = os.fdopen(os.dup(sys.stdout.fileno()), "w", encoding="utf-8",
                           errors="replace")
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        sys.stdout = sys.stderr
    stdin = sys.stdin if stdin is None else stdin
    try:
        import torch  # noqa: F401 - once, now, while the client prepares its requests
    except ImportError:
        pass  # each verdict will say so
    stdout.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    stdout.flush()
    for line in stdin:
        if not line.strip():
            continue
        stdout.write(json.dumps(_answer(line)) + "\n")
        stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.training.file_check",
                                     description="Verify a checkpoint, artifact or checkpoint "
                                                 "directory (or, with --serve, many).")
    parser.add_argument("path", nargs="?")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of a line")
    parser.add_argument("--code-dir", help="folder whose Python classes a pickled module may use")
    parser.add_argument("--serve", action="store_true",
                        help="answer JSON requests on stdin, one verdict per line")
    args = parser.parse_args(argv)
    if args.serve:
        return serve()
    if args.path is None:
        parser.error("PATH is required (or --serve)")
    try:
        sys.stdout.reconfigure(errors="replace")
    except (AttributeError, ValueError):
        pass
    out = verdict(args.path, args.code_dir)
    if args.json:
        print(json.dumps(out))
    elif out["ok"]:
        step = f" step={out['step']}" if out["kind"] == "checkpoint" and out["step"] is not None \
            else ""
        kind = out["kind"] if out["format"] == "itera" else f"{out['format']} {out['kind']}"
        sha = f" sha256={out['sha256'][:12]}…" if out["sha256"] else ""
        print(f"OK {kind}{step}{sha} {_human(out['bytes'] or 0)}")
    else:
        print(f"FAIL {args.path}: {out['problem']}")
    return 0 if out["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
