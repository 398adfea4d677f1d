"""`[[lot]] python`: the interpreter itera-tui is installed in on another box.

A real box often answers a non-interactive ssh command with another `python3`
first on its PATH (a ~/.bashrc that puts pyenv or conda first). The far sshd
here (tests/sshkit.py) gets exactly that: its ~/.bashrc puts a bare venv first
and forgets this repo's PYTHONPATH, so only the interpreter the lot names has
itera-tui. `check --hosts` says what is missing in one line; with the lot's
`python` the far engine starts under that interpreter, and `hosts install` puts this
box's itera-tui into it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import psutil
import pytest

from boxkit import end_processes_under, far_ledger, far_root, two_box_campaign, wait_until
from conftest import REPO, run_cli
from sshkit import Sshd, needs_sshd
from venvkit import make_venv
from tui.campaign import load_plan
from tui.campaign.boxes import box_shares
from tui.remote.start import start_box


@pytest.fixture
def pyenv_box(tmp_path):
    """An sshd whose far ~/.bashrc puts a bare python first, without this repo."""
    bare = make_venv(tmp_path / "bare")
    good = make_venv(tmp_path / "good", sees_these_libraries=True, sees_repo=True)
    box = Sshd(tmp_path / "sshd")
    (box.root / "home" / ".bashrc").write_text(
        f"export PATH={bare.parent}:$PATH\nunset PYTHONPATH\n")
    try:
        box.start()
        yield box, good
    finally:
        box.stop()


def with_python(path, python: str | None):
    text = path.read_text()
    if python is not None:
        text = text.replace('dir = "camp"', f'dir = "camp"\npython = "{python}"', 1)
    path.write_text(text)
    return path


def host_line(path, box) -> str:
    proc = run_cli("check", "--hosts", str(path), cwd=path.parent, env=box.client_env,
                   timeout=180)
    lines = [line for line in proc.stdout.splitlines() if "box2 (lot b)" in line]
    assert lines, proc.stdout + proc.stderr
    return lines[0]


@pytest.mark.slow  # real sshd, venvs, engines
@needs_sshd
def test_check_hosts_names_what_is_missing_and_the_lot_s_python_is_used(pyenv_box, tmp_path):
    box, good = pyenv_box
    # python3 on the far PATH has no itera-tui: said, with where it looked and the fix
    plain = with_python(two_box_campaign(tmp_path / "plain"), None)
    line = host_line(plain, box)
    assert "package: itera-tui is not installed in " in line and "/bare/bin/python3" in line
    assert "[[lot]] python" in line, line
    # a lot naming an interpreter that is not there
    absent = with_python(two_box_campaign(tmp_path / "absent"), "/nowhere/bin/python")
    line = host_line(absent, box)
    assert "python: /nowhere/bin/python is not there" in line, line
    # the lot's python: ready, and the far engine runs under it
    path = with_python(two_box_campaign(tmp_path / "first"), str(good))
    line = host_line(path, box)
    assert "ready: python 3." in line and f"({good})" in line and "(same code)" in line, line
    plan = load_plan(path)
    share = box_shares(plan)[1]
    assert share.python == str(good)
    far = far_root(box)
    try:
        started = start_box(plan, share, box.settings())
        assert started.ok, started.line
        supervisor = psutil.Process(started.pid)
        assert supervisor.cmdline()[0] == str(good), supervisor.cmdline()
        wait_until(lambda: far_ledger(far).exists() and '"run_launched"' in
                   far_ledger(far).read_text(), 60, "the far run")
    finally:
        end_processes_under(far)


def test_python_belongs_to_a_lot_on_another_box(tmp_path):
    from tui.campaign import PlanError

    path = two_box_campaign(tmp_path / "first")
    text = path.read_text().replace('[[lot]]\nid = "a"', '[[lot]]\nid = "a"\npython = "/x/python"')
    path.write_text(text)
    with pytest.raises(PlanError, match="python: is the interpreter on the lot's host"):
        load_plan(path)


@pytest.mark.slow  # real sshd, venvs, engines
@needs_sshd
def test_hosts_install_puts_this_box_s_itera_tui_in_the_lot_s_python(tmp_path):
    """`itera-tui hosts install`: the lot's interpreter there lacks the package; one ssh
    call pip-installs the same version (here from a local wheel, the far pip's own
    PIP_FIND_LINKS: no internet), and the box is then ready with the same code."""
    import shutil

    wheels, source = tmp_path / "wheels", tmp_path / "source"  # built off the checkout
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", "tests", "bench", "docs", "build", "*.egg-info", "__pycache__", ".*cache*"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                            "--no-build-isolation", "-q", str(source), "-w", str(wheels)],
                           cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    # with pip, seeing this python's packages but not itera-tui
    python = make_venv(tmp_path / "far-venv", sees_these_libraries=True, with_pip=True)
    subprocess.run([str(python), "-m", "pip", "uninstall", "-q", "-y", "setuptools"],
                   check=True, timeout=120)  # this python's is the one seen
    box = Sshd(tmp_path / "sshd", far_env={"PATH": f"{python.parent}:/usr/bin:/bin",
                                           "PIP_NO_INDEX": "1",
                                           "PIP_FIND_LINKS": str(wheels)})
    try:
        box.start()
        path = with_python(two_box_campaign(tmp_path / "first"), str(python))
        assert "package: itera-tui is not installed in " in host_line(path, box)
        proc = run_cli("hosts", "install", str(path), cwd=path.parent, env=box.client_env,
                       timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "box2 (lot b): ready: python 3." in proc.stdout and "(same code)" in proc.stdout
    finally:
        box.stop()
