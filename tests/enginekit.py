"""Helpers for engine process tests: write a one-lot campaign, drive an Engine."""

from __future__ import annotations

import json
import shutil
import sys
import textwrap
import time
from pathlib import Path

from tui.campaign import load_plan
from tui.engine import Engine
from tui.engine.decision.answer import Decision

SCRIPTS = Path(__file__).parent / "scripts"
PRINTER = SCRIPTS / "printer.py"


def script_cmd(script: str, *args: str) -> str:
    """A campaign command as users write it: relative to the campaign folder, where
    `write_plan` copies the test scripts (an absolute path would land in the bundle
    as the command's provenance: allowed, but not what these tests are about)."""
    return json.dumps(["python", f"scripts/{script}", *args])


def printer_cmd(*args: str) -> str:
    return script_cmd("printer.py", *args)


def copy_scripts(root: Path) -> None:
    shutil.copytree(SCRIPTS, Path(root) / "scripts", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__"))


def write_plan(root: Path, variants: str, extra: str = "", gpus: int = 1,
               pilot: str = "") -> Path:
    text = textwrap.dedent(f"""
        [campaign]
        name = "t"
        question = "q"
        metric = "acc"

        [[lot]]
        gpu = "cpu"
        hours = 1
        price_usd = 1.0
        gpus = {gpus}

        [metrics]
        step = 'step (\\d+)'
        loss = 'loss[:=]? *(\\S+)'
        acc = 'acc=(\\S+)'
        truncated = 'truncated=(\\d+)'

        [engine]
        grace_seconds = 1.0
    """) + textwrap.dedent(pilot) + textwrap.dedent(variants) + textwrap.dedent(extra)
    copy_scripts(root)
    path = root / "campaign.toml"
    path.write_text(text)
    return path


def control_only(command: str, minutes: float = 1) -> str:
    """The `[[variant]]` of a campaign with the control alone (`command`: a TOML array,
    e.g. `printer_cmd(...)`), the plan most engine and store tests need."""
    return f"""
[[variant]]
id = "control"
category = "mandatory"
command = {command}
minutes = {minutes:g}
"""


def printer_plan(root: Path, args, stops: str = "", **kw) -> Path:
    """A campaign of one mandatory variant `v` running printer.py with `args`, and the
    plan's `stops` (the plan most rule tests need, on real or fake processes)."""
    return write_plan(root, f"""
    [[variant]]
    id = "v"
    category = "mandatory"
    command = {printer_cmd(*args)}
    minutes = 1
    """, stops, **kw)


def step_to_the_end(session, timeout: float = 90) -> None:
    """Step a `CampaignSession` until its engine has nothing left to run (polled, with a
    deadline: a busy box only makes it poll longer)."""
    deadline = time.monotonic() + timeout
    while not session.engine.finished:
        assert time.monotonic() < deadline, f"the campaign did not end in {timeout:g} s"
        session.step()
        time.sleep(0.05)


def wait_while_running(proc, predicate, timeout: float = 30, what: str = "condition",
                       every: float = 0.05):
    """`wait_for` on `predicate` while the process `proc` runs: one that exits before it
    holds fails at once, naming its exit status (and its stderr's end, when piped),
    instead of at the deadline."""
    def ready():
        value = predicate()
        if value or proc.poll() is None:
            return value
        value = predicate()  # it may have done what was waited for, then exited
        if value:
            return value
        err = proc.communicate()[1] if proc.stderr else ""
        raise AssertionError(f"exited ({proc.returncode}) before {what}"
                             + (f":\n{err[-2000:]}" if err else ""))

    return wait_for(ready, timeout, what, every)


def step_until(session, predicate, timeout: float = 60, what: str = "condition"):
    """Step a `CampaignSession` until `predicate(snapshot)` holds (that snapshot returned):
    `wait_for` for a test that drives the session itself."""
    def stepped():
        snap = session.step()
        return snap if predicate(snap) else None

    return wait_for(stepped, timeout, what)


def drive(path: Path, timeout: float = 60, decide: Decision | None = None,
          verifications: bool = False, **kw) -> Engine:
    """Tick a campaign to its end (and, with `verifications`, until every
    acknowledged checkpoint has its fresh-process verdict)."""
    engine = Engine(load_plan(path), poll_interval=0.05, decide=decide, **kw).open()
    deadline = time.time() + timeout
    try:
        while not engine.finished or (verifications and engine.pending_verifications()):
            assert time.time() < deadline, "campaign did not finish in time"
            engine.tick()
            time.sleep(0.05)
    finally:
        engine.close()
    return engine


def wait_for(predicate, timeout: float = 30, what: str = "condition", every: float = 0.05):
    """The one wait of the tests: poll `predicate` until it is truthy (its value is
    returned) or `timeout` seconds of the monotonic clock pass (an AssertionError naming
    `what`). Never a fixed sleep: a busy box only makes it poll longer."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def kill_9_headless_when(path: Path, predicate, what: str, timeout: float = 30) -> None:
    """Start `itera-tui run --headless --no-wrapup`, wait for `predicate`, kill -9 it."""
    import os
    import signal
    import subprocess

    repo = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(repo))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tui.cli", "run", "--headless", "--no-wrapup", str(path)],
        cwd=path.parent, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_while_running(proc, predicate, timeout=timeout, what=what)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
