"""`python -m tui.training.resume_check --save-at K --steps N [--atol 0] -- CMD ...`

Proves that a training script resumes faithfully before days of GPU time depend
on it: run A goes K+N steps uninterrupted; run B stops after K steps with a
checkpoint at K; run C resumes from B's checkpoint up to K+N. The losses of
steps K+1..K+N of A and C must match (bitwise by default), and C must log
no loss before step K: a script that ignores the checkpoint and starts over
reproduces A's losses too, but resumes nothing. Each run is a fresh
process with its own temporary run directory. Prints a one-line verdict,
appends a "resume_check" event to the caller's ITERA_METRICS when set, exits 0
when the resume is faithful and 1 otherwise. Does not import torch.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

_PROTOCOL_VARS = ("ITERA_RUN_ID", "ITERA_RUN_DIR", "ITERA_METRICS", "ITERA_CONTROL", "ITERA_LAUNCHED_AT",
                  "ITERA_MAX_STEPS", "ITERA_RESUME", "ITERA_CHECKPOINT_AT")


class CheckFailed(Exception):
    pass


class _Mismatch(CheckFailed):
    def __init__(self, compared, worst, step, x, y):
        super().__init__(f"losses differ from step {step} (uninterrupted {x!r}, resumed {y!r}); "
                         f"max |diff| {worst:.3g} over {compared} steps")
        self.compared, self.worst = compared, worst


def read_records(path: Path) -> list[dict]:
    records = []
    if not path.exists():
        return records
    for line in path.read_bytes().split(b"\n"):
        try:
            record = json.loads(line)
        except ValueError:
            continue  # blank, torn or foreign line
        if isinstance(record, dict):
            records.append(record)
    return records


def _tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return "\n".join(text[-lines:])


def run_leg(name: str, cmd: list[str], root: Path, extra_env: dict, timeout: float) -> Path:
    """Run one leg of the check in a fresh process; return its run dir."""
    run_dir = root / name
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in _PROTOCOL_VARS}
    parent_id = os.environ.get("ITERA_RUN_ID", "resume-check")
    env.update({"ITERA_RUN_ID": f"{parent_id}.resume-{name}", "ITERA_RUN_DIR": str(run_dir),
                "ITERA_METRICS": str(run_dir / "metrics.jsonl"),
                "ITERA_CONTROL": str(run_dir / "control.jsonl")})
    env.update(extra_env)
    stderr_path = run_dir / "stderr.txt"
    with open(run_dir / "stdout.txt", "wb") as out, open(stderr_path, "wb") as err:
        try:
            code = subprocess.run(cmd, env=env, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                  timeout=timeout).returncode
        except OSError as error:
            raise CheckFailed(f"run {name}: cannot start {cmd[0]}: {error.strerror or error}") from None
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"run {name}: still running after {timeout:g} s") from None
    if code != 0:
        tail = _tail(stderr_path)
        if tail:
            print(f"--- stderr of run {name} (last lines) ---\n{tail}", file=sys.stderr)
        raise CheckFailed(f"run {name} exited with status {code}")
    return run_dir


def losses(run_dir: Path, first: int, last: int, name: str) -> dict[int, float]:
    found: dict[int, float] = {}
    for record in read_records(run_dir / "metrics.jsonl"):
        step, loss = record.get("step"), record.get("loss")
        if "event" not in record and isinstance(step, int) and first <= step <= last \
                and isinstance(loss, (int, float)):
            found[step] = float(loss)
    missing = [s for s in range(first, last + 1) if s not in found]
    if missing:
        raise CheckFailed(f"run {name} logged no loss for step(s) {missing[:5]}"
                          f"{'…' if len(missing) > 5 else ''}")
    return found


def started_over(run_dir: Path, save_at: int) -> int | None:
    """The first step before `save_at` run C logged a loss for, or None. A script that
    ignores ITERA_RESUME trains again from step 1 and, being deterministic, logs the same
    losses after `save_at` as run A: the comparison alone would call it faithful. A loss
    at `save_at` itself is not counted: a faithful script may evaluate what it loaded."""
    steps = [r.get("step") for r in read_records(run_dir / "metrics.jsonl")
             if "event" not in r and isinstance(r.get("loss"), (int, float))]
    early = [s for s in steps if isinstance(s, int) and s < save_at]
    return min(early) if early else None


def checkpoint_of(run_dir: Path, step: int) -> Path:
    acks = [r for r in read_records(run_dir / "metrics.jsonl")
            if r.get("event") == "checkpoint" and r.get("step") == step and isinstance(r.get("path"), str)]
    if not acks:
        raise CheckFailed(f"run B wrote no checkpoint at step {step} "
                          "(does the script call run.checkpoint_requested(step) and run.save_checkpoint?)")
    return run_dir / acks[-1]["path"]


def compare(a: dict[int, float], c: dict[int, float], atol: float) -> tuple[float, int | None]:
    """(max |a-c|, first step that differs beyond atol or None)."""
    worst, first_bad = 0.0, None
    for step in sorted(a):
        x, y = a[step], c[step]
        same = (x == y or (math.isnan(x) and math.isnan(y))) if atol == 0 else abs(x - y) <= atol
        diff = 0.0 if (math.isnan(x) and math.isnan(y)) else abs(x - y)
        worst = diff if math.isnan(diff) else max(worst, diff)
        if not same and first_bad is None:
            first_bad = step
    return worst, first_bad


def check(cmd: list[str], save_at: int, steps: int, atol: float, timeout: float) -> tuple[int, float]:
    root = Path(tempfile.mkdtemp(prefix="itera-resume-check-"))
    try:
        total = save_at + steps
        a = run_leg("A", cmd, root, {"ITERA_MAX_STEPS": str(total)}, timeout)
        b = run_leg("B", cmd, root, {"ITERA_MAX_STEPS": str(save_at), "ITERA_CHECKPOINT_AT": str(save_at)},
                    timeout)
        ckpt = checkpoint_of(b, save_at)
        c = run_leg("C", cmd, root, {"ITERA_MAX_STEPS": str(total), "ITERA_RESUME": str(ckpt)}, timeout)
        early = started_over(c, save_at)
        if early is not None:
            raise CheckFailed(f"run C started over instead of resuming at step {save_at}: it logged "
                              f"a loss at step {early} (does the script load ITERA_RESUME, "
                              "run.resume_from?)")
        la = losses(a, save_at + 1, total, "A")
        lc = losses(c, save_at + 1, total, "C")
        worst, first_bad = compare(la, lc, atol)
        if first_bad is not None:
            raise _Mismatch(len(la), worst, first_bad, la[first_bad], lc[first_bad])
        return len(la), worst
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _report(ok: bool, compared: int, worst: float | None, save_at: int, reason: str | None) -> None:
    target = os.environ.get("ITERA_METRICS")
    if not target:
        return
    record = {"t": time.time(), "step": save_at, "event": "resume_check", "ok": ok,
              "steps_compared": compared, "max_abs_diff": worst}
    if reason:
        record["problem"] = reason
    try:
        with open(target, "a") as f:
            f.write(json.dumps(record) + "\n")
    except OSError as error:
        print(f"resume_check: cannot append to ITERA_METRICS: {error}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tui.training.resume_check",
                                     description="Check that a training script resumes faithfully.")
    parser.add_argument("--save-at", type=int, required=True, metavar="K", help="checkpoint after step K")
    parser.add_argument("--steps", type=int, required=True, metavar="N", help="compare steps K+1..K+N")
    parser.add_argument("--atol", type=float, default=0.0, help="tolerance (0: bitwise equality)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds allowed per run")
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- the training command")
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("give the training command after --")
    if cmd[0] in ("python", "python3"):
        # the same interpreter (and environment) the check itself runs in, as the engine does
        cmd = [sys.executable, *cmd[1:]]
    if args.save_at < 1 or args.steps < 1 or args.atol < 0:
        parser.error("--save-at and --steps must be >= 1 and --atol >= 0")
    try:
        compared, worst = check(cmd, args.save_at, args.steps, args.atol, args.timeout)
    except _Mismatch as error:
        print(f"resume check FAILED: {error}")
        _report(False, error.compared, error.worst, args.save_at, str(error))
        return 1
    except CheckFailed as error:
        print(f"resume check FAILED: {error}")
        _report(False, 0, None, args.save_at, str(error))
        return 1
    how = "bitwise identical" if args.atol == 0 else f"within atol={args.atol:g}"
    print(f"resume check OK: steps {args.save_at + 1}-{args.save_at + args.steps} {how} "
          f"after resuming at step {args.save_at} (max |diff| {worst:.3g})")
    _report(True, compared, worst, args.save_at, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
