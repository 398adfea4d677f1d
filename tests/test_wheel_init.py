"""Installed from a wheel, itera-tui has somewhere to start (issue 36 item 16).

The wheel is built from this checkout's files (copied aside, so the build leaves nothing
in the tree), installed without its dependencies into a fresh venv that sees this
interpreter's libraries (torch, textual...) but not this checkout, and then, in an empty
folder: `itera-tui init --demo`, `check`, and the demo headless to a verified bundle.
The headless run answers the decision with `wrapup` once the pilots are done: every
part of the installed package a campaign needs runs (the checks, torch training from
the packaged corpus, the decision, the bundle, its figures and fresh-process reloads),
without the full runs' minutes, which tests/test_demo_e2e.py already covers.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from venvkit import make_venv

pytestmark = pytest.mark.slow


def _built_wheel(where: Path) -> Path:
    source = where / "source"
    source.mkdir()
    shutil.copytree(REPO / "tui", source / "tui",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    out = where / "wheel"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", ".", "-w", str(out)], cwd=source, check=True, timeout=300,
                   capture_output=True)
    (wheel,) = out.glob("itera_tui-*.whl")
    return wheel


@pytest.mark.timeout(1500)
def test_a_wheel_in_a_fresh_venv_inits_the_demo_and_runs_it_to_a_verified_bundle(tmp_path):
    wheel = _built_wheel(tmp_path)
    venv = make_venv(tmp_path / "venv", sees_these_libraries=True).parent.parent
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install",
                    "--no-deps", "--no-index", "-q", str(wheel)], check=True, timeout=300,
                   capture_output=True)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    empty = tmp_path / "empty folder"
    empty.mkdir()

    def cli(*args, timeout=120):
        return subprocess.run([str(venv / "bin" / "itera-tui"), *args], cwd=empty, env=env,
                              capture_output=True, text=True, timeout=timeout)

    where = subprocess.run([str(python), "-c", "import tui; print(tui.__file__)"], cwd=empty,
                           env=env, capture_output=True, text=True, check=True, timeout=60)
    assert str(venv) in where.stdout and str(REPO) not in where.stdout  # the wheel's tui

    missing = cli("check")
    assert missing.returncode == 2 and "itera-tui init" in missing.stderr  # the way forward
    done = cli("init", "--demo")
    assert done.returncode == 0, done.stderr
    assert (empty / "campaign.toml").is_file() and (empty / "data" / "train.jsonl").is_file()
    checked = cli("check")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    run = cli("run", "--headless", "--decide", "wrapup", timeout=1200)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "bundle: outputs/bundle (verified)" in run.stdout
    verified = cli("verify", "outputs/bundle", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["verified"] is True
    fetch = (empty / "outputs" / "FETCH.txt").read_text()
    assert fetch.startswith("rsync -avP ")  # the command, whole, for `cat`
    assert f"fetch it: {fetch.strip()} (also in outputs/FETCH.txt)" in run.stdout
