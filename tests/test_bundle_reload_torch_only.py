"""RELOAD.md followed literally, in a fresh venv holding only torch and numpy.

A real demo run (`tui.demo.train`, the real SDK) is bundled by the real
wrap-up; the bundle is copied elsewhere, as a reader would fetch it, the
Python block of its RELOAD.md is saved as `reload.py` and run there with the
venv's interpreter, no itera-tui importable and no PYTHONPATH, the corpus
files the plan pins given by ITERA_CORPUS. It must rebuild the demo model
from the code the bundle keeps in `code/` and reproduce the run's
predictions.jsonl; a corpus file that is not the pinned one is refused.
The venv is made with `python -m venv` (no system site-packages) and
the `pip install` RELOAD.md names (torch pinned), as a reader would.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, run_cli
from venvkit import make_venv

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # pip, on a busy box

DATA = REPO / "tui" / "demo" / "data"
CAMPAIGN = """
[campaign]
name = "reload"
question = "Does the demo model come back with torch alone?"
metric = "val_acc"
direction = "max"
min_gain = 0.02
control = "control"
outputs = "outputs"

[[lot]]
id = "demo"
gpu = "CPU demo slots"
minutes = 20
gpus = 1
price_usd = 0.50

[corpus]
root = "tui/demo/data"
files = {{ "train.jsonl" = "{train}", "val.jsonl" = "{val}" }}
max_len = 128

[[variant]]
id = "control"
category = "mandatory"
command = ["python", "-m", "tui.demo.train", "--lr", "3e-3", "--steps", "40", "--max-len", "128"]
steps = 40
minutes = 1
"""


def _sha256(path: Path) -> str:
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def torch_only_python(tmp_path_factory) -> Path:
    python = make_venv(tmp_path_factory.mktemp("venv") / "torch-only", with_pip=True)
    from tui.bundle.reloaddoc import PIP_INSTALL

    # what RELOAD.md tells a reader to install, torch pinned to the version tested
    wanted = ["torch==2.13.0" if p == "torch" else p for p in PIP_INSTALL.split()[2:]]
    done = subprocess.run([str(python), "-m", "pip", "install", "-q", *wanted],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    return python


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("reload")
    shutil.copytree(DATA, root / "tui/demo/data")
    (root / "campaign.toml").write_text(CAMPAIGN.format(train=_sha256(DATA / "train.jsonl"),
                                                        val=_sha256(DATA / "val.jsonl")))
    proc = run_cli("run", "--headless", str(root / "campaign.toml"), cwd=root, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return root / "outputs" / "bundle"


def _reload(python: Path, fetched: Path, corpus: Path) -> subprocess.CompletedProcess:
    """RELOAD.md, literally: its Python block saved as reload.py, run from the bundle."""
    text = (fetched / "RELOAD.md").read_text()
    (block,) = re.findall(r"```python\n(.*?)```", text, re.S)
    (fetched / "reload.py").write_text(block)
    env = {"PATH": f"{python.parent}{os.pathsep}/usr/bin:/bin", "ITERA_CORPUS": str(corpus),
           "HOME": str(fetched)}
    return subprocess.run(["python", "reload.py"], cwd=fetched, env=env, capture_output=True,
                          text=True, timeout=300)


def test_reload_md_rebuilds_the_demo_model_and_reproduces_its_predictions(
        bundle, torch_only_python, tmp_path):
    python = torch_only_python
    alone = subprocess.run([str(python), "-c", "import tui"], cwd=tmp_path,
                           capture_output=True, text=True, env={"PATH": "/usr/bin:/bin"})
    assert "No module named 'tui'" in alone.stderr  # only torch (and numpy) in there
    manifest = json.loads((bundle / "manifest.json").read_text())
    (run,) = manifest["runs"]
    artifact = f"runs/{run['id']}/model.pt"
    assert manifest["code"]["rebuild"][artifact] == {"builder": "tui.demo.model:from_meta",
                                                     "predict": "tui.demo.predict:predictions"}
    assert {"code/tui/demo/model.py", "code/tui/demo/predict.py", "code/tui/demo/dataset.py",
            "code/tui/demo/report.py"} <= set(manifest["code"]["modules"])
    fetched = tmp_path / "fetched"  # as a reader has it: a copy, elsewhere
    shutil.copytree(bundle, fetched)
    corpus = tmp_path / "corpus"
    shutil.copytree(DATA, corpus)
    done = _reload(python, fetched, corpus)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "Failed to initialize NumPy" not in done.stderr  # issue 44, item 8
    assert f"{artifact}: rebuilt TopicGRU" in done.stdout
    assert f"runs/{run['id']}/predictions.jsonl: reproduced, 400 of 400 predictions" \
        in done.stdout
    with open(corpus / "val.jsonl", "a") as f:  # not the file the plan pins: refused
        f.write("\n")
    refused = _reload(python, fetched, corpus)
    assert refused.returncode != 0
    assert "val.jsonl: not the corpus file plan.toml pins" in refused.stderr


# RELOAD.md followed as written, then `itera-tui verify .`: still VERIFIED (issue 44,
# item 1). Run from inside a copy with Python's bytecode caching on (the default outside
# this suite): the snippet leaves nothing in the bundle, and a `__pycache__` that an
# import with caching on does leave is named by verify as extra, never a failure.


def _caching_env(**extra: str) -> dict[str, str]:
    """This process's environment with bytecode caching on, as a person's shell has it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return env | extra


def _caches(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("__pycache__"))


def test_reload_md_as_written_then_verify_is_still_verified(bundle, tmp_path):
    fetched = tmp_path / "fetched"
    shutil.copytree(bundle, fetched)
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
