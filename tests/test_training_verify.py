"""`python -m tui.training.file_check` in a fresh process: one clear line, exit 1, no
traceback for every way a checkpoint file can go bad."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tui import training
from tui.training.atomic import write_torch_file

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

REPO = Path(__file__).resolve().parents[1]


def verify(path: Path, *flags) -> tuple[int, str, str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-m", "tui.training.file_check", str(path), *flags],
                          capture_output=True, text=True, timeout=60, env=env)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture(scope="module")
def good(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("verify")
    run = training.attach(env={"ITERA_RUN_DIR": str(root), "ITERA_METRICS": str(root / "m.jsonl")},
                          checkpoint_on_sigterm=False)
    model = torch.nn.Linear(256, 256)
    info = run.save_checkpoint(model=model, optimizer=torch.optim.AdamW(model.parameters()), step=10)
    return info.path


def damaged(good: Path, tmp_path: Path, how) -> Path:
    copy = tmp_path / good.name
    shutil.copy(good, copy)
    shutil.copy(good.with_name(good.name + ".json"), copy.with_name(copy.name + ".json"))
    how(copy)
    return copy


def flip_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))


def test_a_good_checkpoint_verifies(good):
    code, out, err = verify(good)
    assert code == 0, out + err
    assert out.startswith("OK checkpoint step=10 ") and out.rstrip().endswith("kB")
    assert out.count("\n") == 1
    code, out, _ = verify(good, "--json")
    report = json.loads(out)
    assert code == 0 and report["ok"] is True and report["kind"] == "checkpoint" and report["problem"] is None


@pytest.mark.parametrize("how, reason", [
    (flip_byte, "mismatch: file is corrupted"),
    (lambda p: os.truncate(p, p.stat().st_size // 2), "truncated:"),
    (lambda p: p.write_bytes(b""), "empty file (0 bytes)"),
    (lambda p: p.with_name(p.name + ".json").unlink(), "sidecar step-000010.pt.json is not beside step-000010.pt"),
    (lambda p: p.unlink(), "no such file"),
])
def test_damaged_files_fail_with_one_clear_line(good, tmp_path, how, reason):
    path = damaged(good, tmp_path, how)
    code, out, err = verify(path)
    assert code == 1
    assert out == f"FAIL {path}: " + out.split(": ", 1)[1] and reason in out and out.count("\n") == 1
    assert "Traceback" not in out + err
    report = json.loads(verify(path, "--json")[1])
    assert report["ok"] is False and reason in report["problem"]


def test_files_that_are_not_itera_torch_files_fail_cleanly(tmp_path):
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"this is not a zip archive\n" * 100)
    write_torch_file({"x": torch.zeros(1)}, tmp_path / "plain.pt", kind="checkpoint", step=1)
    junk_sidecar = json.loads((tmp_path / "plain.pt.json").read_text())
    from tui.training.atomic import file_sha256
    junk_sidecar["sha256"], junk_sidecar["bytes"] = file_sha256(junk)
    (tmp_path / "junk.pt.json").write_text(json.dumps(junk_sidecar))
    code, out, err = verify(junk)
    assert code == 1 and "not a loadable torch file" in out and "Traceback" not in out + err
    code, out, err = verify(tmp_path / "plain.pt")
    assert code == 1 and "itera_kind=None" in out and "Traceback" not in out + err


def test_an_artifact_verifies(tmp_path):
    info = training.save_artifact(tmp_path / "model.pt", state_dict=torch.nn.Linear(2, 2), meta={"a": 1})
    code, out, _ = verify(info.path)
    assert code == 0 and out.startswith("OK artifact sha256=" + info.sha256[:12])
