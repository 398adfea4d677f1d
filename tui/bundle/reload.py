"""Reload checkpoints and artifacts in fresh processes, the only place torch runs.

A file that is present but cannot be reloaded is not a verified output. The
check is `python -m tui.training.verify PATH --json` in a new interpreter
(never in the caller, which must stay free of torch): it compares the file
with its sidecar (size, sha256), loads it with weights_only=True and checks
its structure. Files are checked in parallel, a few at a time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Callable

import tui

REPO_ROOT = Path(tui.__file__).resolve().parents[1]
RELOAD_TIMEOUT_S = 600.0


def fresh_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def reload_one(path: Path, timeout: float = RELOAD_TIMEOUT_S) -> dict:
    """{"ok", "problem", "kind", "step"} from a fresh `tui.training.verify` process."""
    path = Path(path).resolve()  # the check runs in the file's folder: a relative path breaks
    cmd = [sys.executable, "-m", "tui.training.verify", str(path), "--json"]
    try:
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              env=fresh_env(), cwd=path.parent, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"ok": False, "problem": f"reload check timed out after {timeout:g} s"}
    except OSError as exc:
        return {"ok": False, "problem": f"cannot start the reload check: {exc}"}
    verdict = None
    for line in reversed(done.stdout.strip().splitlines()):
        try:
            verdict = json.loads(line)
            break
        except ValueError:
            continue
    if not isinstance(verdict, dict):
        tail = (done.stderr.strip().splitlines() or [""])[-1][:200]
        return {"ok": False, "problem": f"reload check exited {done.returncode} without a "
                                        f"verdict{': ' + tail if tail else ''}"}
    ok = bool(verdict.get("ok")) and done.returncode == 0
    problem = verdict.get("problem") or (None if ok else f"exit status {done.returncode}")
    return {"ok": ok, "problem": problem, "kind": verdict.get("kind"),
            "step": verdict.get("step")}


def reload_many(paths: list[Path], progress: Callable[[str], None] | None = None,
                label: Callable[[Path], str] = str) -> dict[Path, dict]:
    """Verdict per path; progress says "reloading i/N" as each finishes."""
    results: dict[Path, dict] = {}
    if not paths:
        return results
    workers = max(1, min(4, os.cpu_count() or 1, len(paths)))
    with ThreadPoolExecutor(workers, thread_name_prefix="itera-reload") as pool:
        futures = {pool.submit(reload_one, p): p for p in paths}
        for i, future in enumerate(as_completed(futures), 1):
            path = futures[future]
            results[path] = future.result()
            if progress:
                verdict = "ok" if results[path]["ok"] else "FAILED"
                progress(f"verifying reloads {i}/{len(paths)}: {label(path)} {verdict}")
    return results
