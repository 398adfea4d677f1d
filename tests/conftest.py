"""Shared test helpers: write campaign files, run the CLI in a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def needs(*modules: str):
    """Skip unless every module is installed, without importing it: the test extra
    installs them, and `pytest.importorskip("lightning")` at a module's top made every
    xdist worker import lightning (about 5 CPU-seconds) only to collect the file."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    return pytest.mark.skipif(bool(missing), reason=f"needs {', '.join(missing)} "
                              "(pip install -e '.[test]')")


def run_cli(*args: str, cwd: Path | None = None, timeout: float = 120,
            env: dict | None = None) -> subprocess.CompletedProcess:
    """Run `python -m tui.cli ARGS` exactly as a user's shell would: for the tests about
    the real command line (an exit status through an interpreter, a detached engine,
    signals, ssh). Anything else runs the command in-process: `clikit.cli`."""
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = str(REPO) + os.pathsep + full_env.get("PYTHONPATH", "")
    if env:
        full_env.update(env)
    return subprocess.run([sys.executable, "-m", "tui.cli", *args], cwd=cwd, env=full_env,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def utc(monkeypatch):
    """The process's local time zone is UTC for the test: screens that print local
    times read the same on every machine."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def stand_in_scripts(path: Path) -> None:
    """Write a stand-in for each `python NAME.py` a campaign file names that does not
    exist beside it, one that mentions the campaign's metric: `check` refuses a plan
    whose script is missing or whose metric nothing logs (tui.campaign.preflight), and
    tests about other parts of `check` are not about that."""
    import re
    import tomllib

    try:
        raw = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError):
        return
    campaign = raw.get("campaign") if isinstance(raw.get("campaign"), dict) else {}
    metric = campaign.get("metric", "val_acc")
    for name in set(re.findall(r"python3?\"?,? *\"?([\w./-]+\.py)\b", path.read_text())):
        script = path.parent / name
        if not script.exists() and ".." not in name and not name.startswith("/"):
            script.parent.mkdir(parents=True, exist_ok=True)
            script.write_text(f"# a stand-in: the real script logs {metric}\n")


@pytest.fixture
def write_campaign(tmp_path):
    def write(text: str, name: str = "campaign.toml", scripts: bool = True) -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        if scripts:
            stand_in_scripts(path)
        return path
    return write


@pytest.fixture(autouse=True)
def _claims_in_process_settle_at_once(monkeypatch):
    """A resume's claim on the store's lease reads the claims back `SETTLE_S` (3 s) after
    writing its own, for a rival box's list-to-put: a claim made in the test's own process
    (`fetch_campaign`, `take_over`) has no rival on another box, so it reads back at once.
    The race itself is tested with a settle of its own (`test_store_lease`), and a real
    `itera-tui resume` (a process of its own) settles as on a box."""
    from tui.store import lease

    monkeypatch.setattr(lease, "SETTLE_S", 0.0)


class _StartsProcess(Exception):
    """Raised where a fast-tier test would start a process."""


@pytest.fixture(autouse=True)
def _fast_tests_start_no_process(request, monkeypatch):
    """A test not marked `slow` starts no process: the fast loop (`-m "not slow"`) is the
    inner loop, and a subprocess (an interpreter, a CLI run, an engine) costs it seconds
    of a 2-core box. Such a test fails here, naming itself; mark it `slow`."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    import subprocess

    name = request.node.nodeid

    def refuse(*args, **kwargs):
        raise _StartsProcess(f"{name} starts a process but is not marked slow "
                             "(@pytest.mark.slow): the fast loop starts none")

    monkeypatch.setattr(subprocess.Popen, "_execute_child", refuse)
    monkeypatch.setattr(os, "fork", refuse)
    monkeypatch.setattr(os, "posix_spawn", refuse)
    monkeypatch.setattr(os, "posix_spawnp", refuse)
    yield
