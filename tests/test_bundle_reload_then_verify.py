"""RELOAD.md followed as written, then `itera-tui verify .`: still VERIFIED (issue 44, item 1).

A person copies the bundle, runs RELOAD.md's Python block from inside it with
Python's bytecode caching on (the default outside this test suite) and then
runs the `itera-tui verify .` RELOAD.md advises. The snippet must leave nothing
in the bundle; and a `__pycache__` that an import with caching on does leave
(an older snippet, a person's own `python -c "import ..."`) is named by verify
as extra, a warning, never a failure.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from test_bundle_reload_torch_only import CAMPAIGN, DATA, _sha256

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.fixture(scope="module")
def demo_bundle(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("reload-verify")
    shutil.copytree(DATA, root / "tui/demo/data")
    (root / "campaign.toml").write_text(CAMPAIGN.format(train=_sha256(DATA / "train.jsonl"),
                                                        val=_sha256(DATA / "val.jsonl")))
    proc = run_cli("run", "--headless", str(root / "campaign.toml"), cwd=root, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root / "outputs" / "bundle"


def _caching_env(**extra: str) -> dict[str, str]:
    """This process's environment with bytecode caching on, as a person's shell has it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | extra


def _caches(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("__pycache__"))


def test_reload_md_as_written_then_verify_is_still_verified(demo_bundle, tmp_path):
    fetched = tmp_path / "fetched"
    shutil.copytree(demo_bundle, fetched)
    (block,) = re.findall(r"```python\n(.*?)```", (fetched / "RELOAD.md").read_text(), re.S)
    (fetched / "reload.py").write_text(block)
    done = subprocess.run([sys.executable, "reload.py"], cwd=fetched, capture_output=True,
                          text=True, timeout=300, env=_caching_env(ITERA_CORPUS=str(DATA)))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "reproduced, 400 of 400 predictions" in done.stdout
    assert _caches(fetched) == []  # the snippet wrote no bytecode into code/
    checked = run_cli("verify", ".", cwd=fetched, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("VERIFIED .: ")
    assert "note: reload.py (1 file) was added beside the bundle" in checked.stdout

    # an import of the bundle's code with caching on does leave a cache: extra, not a failure
    subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'code'); "
                    "import tui.demo.model, tui.demo.predict"], cwd=fetched, check=True,
                   timeout=120, env=_caching_env())
    caches = _caches(fetched)
    assert caches and all(c.startswith("code/") for c in caches)
    checked = run_cli("verify", ".", cwd=fetched, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("VERIFIED .: ")
    notes = [line for line in checked.stdout.splitlines() if "bytecode cache" in line]
    assert [n.split(" (")[0] for n in notes] == [f"  note: {c}/" for c in caches]
    assert all("extra, not part of the bundle, not read" in n for n in notes)
