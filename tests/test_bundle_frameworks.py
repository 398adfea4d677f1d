"""Checkpoints the frameworks write, in a bundle: an HF `checkpoint-N/` directory, a
Lightning `.ckpt` found by a watch glob, a `.safetensors` model file.

They are acknowledged in the ledger as the watcher and the callbacks do (mode
"hf" / "watched", a path relative to the run directory), never verified during
the run, so the wrap-up verifies them itself, copies each whole, and reloads
all of them in one fresh verifier process.
"""

import json
import shutil
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import delivered_campaign, manifest, relist, verifiers_during  # noqa: E402
from tui.bundle.bundle_check import verify_bundle  # noqa: E402
from tui.bundle.wrapup import build_bundle  # noqa: E402
from tui.campaign import load_plan  # noqa: E402
from tui.engine.ledger.file import Ledger  # noqa: E402
from tui.engine.ledger.events import CheckpointAcknowledged

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

HF_DIR = "out/checkpoint-4"
CKPT = "lightning_logs/version_0/checkpoints/epoch=0-step=3.ckpt"


def run_dir(campaign: Path, variant: str) -> Path:
    [path] = [p for p in (campaign / ".itera" / "runs").iterdir()
              if p.name.startswith(variant + "-")]
    return path


def write_hf_checkpoint(path: Path) -> None:
    """The files of an HF Trainer checkpoint, written by their own libraries."""
    path.mkdir(parents=True)
    layer = torch.nn.Linear(4, 4)
    save_file({k: v.contiguous() for k, v in layer.state_dict().items()},
              path / "model.safetensors")
    (path / "config.json").write_text(json.dumps({"model_type": "tiny", "hidden": 4}))
    (path / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
    torch.save(torch.optim.AdamW(layer.parameters()).state_dict(), path / "optimizer.pt")


def write_lightning_checkpoint(path: Path) -> None:
    path.parent.mkdir(parents=True)
    torch.save({"epoch": 0, "global_step": 3, "pytorch-lightning_version": "2.6.6",
                "state_dict": torch.nn.Linear(2, 1).state_dict(), "loops": {},
                "callbacks": {}, "optimizer_states": [], "lr_schedulers": []}, path)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Built once for the module: the tests read it, or damage a copy of its bundle."""
    source = delivered_campaign(tmp_path_factory).parent
    campaign = tmp_path_factory.mktemp("frameworks") / "campaign"
    shutil.copytree(source, campaign, ignore=shutil.ignore_patterns("outputs"))
    control, wide = run_dir(campaign, "control"), run_dir(campaign, "wide")
    write_hf_checkpoint(control / HF_DIR)
    write_lightning_checkpoint(wide / CKPT)
    save_file({"w": torch.ones(3)}, wide / "model.safetensors")
    ledger = Ledger(campaign / ".itera" / "ledger.jsonl", time.time)
    ledger.append(CheckpointAcknowledged(run=control.name, path=HF_DIR, step=4,
                  sha256="0" * 64, mode="hf"))
    ledger.append(CheckpointAcknowledged(run=wide.name, path=CKPT, step=3,
                  sha256="0" * 64, mode="watched"))
    plan = load_plan(campaign / "campaign.toml", check_files=False)
    messages = []
    result, verifiers = verifiers_during(lambda: build_bundle(plan, progress=messages.append))
    return campaign, result, messages, verifiers, control.name, wide.name


def test_framework_checkpoints_are_bundled_whole_and_reloaded_in_one_process(built):
    campaign, result, messages, verifiers, control, wide = built
    assert result.verified, result.failures
    assert len(verifiers) == 1
    m = manifest(result.bundle_dir)
    runs = {r["id"]: r for r in m["runs"]}
    assert runs[control]["checkpoint"] == f"runs/{control}/{HF_DIR}"
    assert runs[control]["checkpoint_step"] == 4 and "out/" not in runs[control].get(
        "not_copied", [])
    assert runs[wide]["checkpoint"] == f"runs/{wide}/{CKPT}"
    assert runs[wide]["checkpoint_step"] == 3
    assert f"runs/{wide}/model.safetensors" in runs[wide]["artifacts"]
    units = {f["path"]: f.get("unit") for f in m["files"]}
    hf_files = sorted(p for p, u in units.items() if u == f"runs/{control}/{HF_DIR}")
    assert [p.rsplit("/", 1)[1] for p in hf_files] == [
        "config.json", "model.safetensors", "optimizer.pt", "trainer_state.json"]
    reloaded = sorted(msg.split(": ", 1)[1].split(" ok")[0] for msg in messages
                      if msg.startswith("reloaded "))
    assert f"runs/{control}/{HF_DIR}" in reloaded
    assert f"runs/{wide}/model.safetensors" in reloaded
    # never verified during the run: verified at wrap-up before being trusted (the
    # Lightning file's verdict is kept for the same bytes, the directory's checked again)
    for rel, rid in ((HF_DIR, control), (CKPT, wide)):
        assert f"verifying checkpoint {rel} of {rid} (never verified during the run)" \
            in messages
    assert "4 checkpoints/artifacts reloaded" in (result.bundle_dir / "report.md").read_text()


def test_a_damaged_file_in_a_bundled_checkpoint_directory_is_named(built, tmp_path):
    _, result, _, _, control, _ = built
    copy = tmp_path / "copy"
    shutil.copytree(result.bundle_dir, copy)
    rel = f"runs/{control}/{HF_DIR}/config.json"
    (copy / rel).write_text("{broken")
    relist(copy, rel)  # the manifest agrees: only the reload can tell
    failures = verify_bundle(copy).failures
    assert failures == [{"path": f"runs/{control}/{HF_DIR}",
                         "problem": "does not reload in a fresh process: config.json: not "
                                    "valid JSON (Expecting property name enclosed in double "
                                    "quotes: line 1 column 2 (char 1))"}]
