"""Weights full of NaN are never "reloaded ok", in any format (issue 34, item 8).

A run stopped by `non_finite` often saves once more on its way out; the file
loads perfectly. The verifier runs every floating-point tensor through one
finite test (`tui.training.finite`) for safetensors, torch, SDK and HF
directories alike, and the bundle and its report name such a file as
non-finite, never "ok".
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

import pytest

from conftest import needs
from tui.training.file_check import verdict

sys.path.insert(0, str(Path(__file__).parent / "scripts"))  # bundlekit
torch = pytest.importorskip("torch")


def _nan(n: int = 4) -> dict:
    return {f"lora_{i}": torch.full((2, 2), math.nan) for i in range(n)}


@needs("safetensors")
def test_a_safetensors_file_of_nan_is_non_finite_not_ok(tmp_path):
    from safetensors.torch import save_file

    save_file(_nan() | {"fine": torch.ones(2)}, str(tmp_path / "adapter_model.safetensors"))
    out = verdict(str(tmp_path / "adapter_model.safetensors"))
    assert out["ok"] is False and out["non_finite"] is True
    assert out["problem"].startswith("non-finite weights: 4 of 5 tensors hold NaN or inf")


def test_a_torch_state_dict_and_a_module_checkpoint_of_nan_are_non_finite(tmp_path):
    torch.save(_nan(), tmp_path / "model.pt")
    torch.save({"state_dict": {"w": torch.tensor([1.0, math.inf])}, "epoch": 1},
               tmp_path / "last.ckpt")
    for name in ("model.pt", "last.ckpt"):
        out = verdict(str(tmp_path / name))
        assert out["ok"] is False and out["non_finite"] is True, out


def test_an_sdk_artifact_of_nan_is_non_finite(tmp_path):
    from tui.training import save_artifact

    save_artifact(tmp_path / "model.pt", state_dict=_nan(2), meta={"m": 1})
    out = verdict(str(tmp_path / "model.pt"))
    assert out["ok"] is False and out["non_finite"] is True, out


@needs("safetensors")
def test_an_hf_checkpoint_folder_with_nan_weights_names_the_file(tmp_path):
    from safetensors.torch import save_file

    folder = tmp_path / "checkpoint-20"
    folder.mkdir()
    save_file(_nan(), str(folder / "model.safetensors"))
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": 20}))
    out = verdict(str(folder))
    assert out["ok"] is False and out["non_finite"] is True
    assert out["problem"].startswith("model.safetensors: non-finite weights")


def test_a_causal_mask_of_minus_inf_is_not_a_divergence(tmp_path):
    torch.save({"w": torch.ones(3), "mask": torch.full((4, 4), -math.inf).triu(1)},
               tmp_path / "masked.pt")
    torch.save({"w": torch.full((3,), math.inf)}, tmp_path / "inf.pt")
    assert verdict(str(tmp_path / "masked.pt"))["ok"] is True
    assert verdict(str(tmp_path / "inf.pt"))["non_finite"] is True  # all inf: no mask


@pytest.mark.slow
@needs("safetensors")
def test_the_bundle_and_report_name_a_nan_adapter_non_finite_never_ok(tmp_path):
    from bundlekit import deliver_cmd, write_campaign
    from enginekit import drive
    from tui.bundle.wrapup import build_bundle
    from tui.campaign import load_plan

    path = write_campaign(tmp_path, f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {deliver_cmd("--label", "control", "--torch")}
        minutes = 2

        [[variant]]
        id = "lora_nan"
        category = "useful"
        command = {deliver_cmd("--label", "nan", "--nan-at", "3", "--nan-weights",
                               "adapter_model.safetensors")}
        minutes = 2

        [[stop]]
        rule = "non_finite"
        metrics = ["loss"]
    """)
    engine = drive(path, timeout=120)
    nan_run = next(r for r in engine.state.runs if r.target == "lora_nan")
    assert nan_run.stop.rule == "non_finite"
    lines: list[str] = []
    plan = load_plan(path, check_files=False)
    result = build_bundle(plan, progress=lines.append)
    rel = f"runs/{nan_run.id}/adapter_model.safetensors"
    said = [line for line in lines if rel in line]
    assert said and not any(" ok (" in line for line in said), said
    assert any("NON-FINITE (non-finite weights: 4 of 4 tensors" in line for line in said)
    assert result.verified, result.failures  # a faithful copy: the bundle itself is sound
    report = (result.bundle_dir / "report.md").read_text()
    assert f"- `{rel}`: non-finite weights: 4 of 4 tensors hold NaN or inf" in report
    assert "**not usable**" in report
    manifest = json.loads((result.bundle_dir / "manifest.json").read_text())
    entry = next(r for r in manifest["runs"] if r["id"] == nan_run.id)
    assert not entry.get("accepted")
