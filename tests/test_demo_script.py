"""The embedded demo, run for real: corpus, data check and training script.

Why: a newcomer's first contact is the demo campaign, so its pieces are tested
as the engine uses them: real subprocesses with the ITERA_* environment, real
torch on CPU, real files.  ITERA_MAX_STEPS keeps every run to a few seconds.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tui.demo import corpus

DATA = Path(corpus.__file__).resolve().parent / "data"
PINS = {
    "train.jsonl": "be12b607b1b71264f06a23147876c0dedb63b6ed35abb1f5d339281ef35d44f1",
    "val.jsonl": "dd67877625a7f13a9b7edee25a1e10017dd42cb8735a1030ed64b0683c4460b2",
}


def itera_env(run_dir: Path, **extra: str) -> dict:
    run_dir.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITERA_")}
    env.update(ITERA_RUN_ID="demo-test", ITERA_RUN_DIR=str(run_dir),
               ITERA_METRICS=str(run_dir / "metrics.jsonl"),
               ITERA_CONTROL=str(run_dir / "control.jsonl"), **extra)
    return env


def records(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return []
    complete = path.read_text().split("\n")[:-1]  # a line still being written waits
    return [json.loads(line) for line in complete if line.strip()]


def run_module(module: str, *args: str, env: dict | None = None, timeout: float = 60):
    return subprocess.run([sys.executable, "-m", module, *args], env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_corpus_is_byte_identical_when_regenerated(tmp_path):
    done = run_module("tui.demo.corpus", "--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    for name, digest in PINS.items():
        assert (tmp_path / name).read_bytes() == (DATA / name).read_bytes()
        assert digest in done.stdout
    assert sum((DATA / name).stat().st_size for name in PINS) < 300_000


@pytest.mark.slow
def test_data_check_passes_on_pinned_files_and_counts_long_inputs(tmp_path):
    pins = [f"{DATA / name}={digest}" for name, digest in PINS.items()]
    done = run_module("tui.demo.data_check", "--max-len", "64", *pins, env=itera_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "data check ok" in done.stdout
    counts = next(r for r in records(tmp_path) if "truncated" in r and "event" not in r)
    assert counts["step"] == 0 and counts["examples"] == 2200 and counts["truncated"] > 0
    event = next(r for r in records(tmp_path) if r.get("event") == "data_check")
    assert event["ok"] is True and len(event["files"]) == 2


@pytest.mark.slow
def test_data_check_fails_on_a_changed_or_missing_file(tmp_path):
    changed = tmp_path / "val.jsonl"
    changed.write_bytes((DATA / "val.jsonl").read_bytes().replace(b'"label":0', b'"label":1', 1))
    done = run_module("tui.demo.data_check", "--max-len", "64", f"{changed}={PINS['val.jsonl']}",
                      f"{tmp_path / 'gone.jsonl'}={PINS['train.jsonl']}",
                      env=itera_env(tmp_path / "run"))
    assert done.returncode == 1
    assert "sha256 mismatch" in done.stderr and "missing" in done.stderr
    event = next(r for r in records(tmp_path / "run") if r.get("event") == "data_check")
    assert event["ok"] is False


@pytest.mark.slow
def test_short_run_delivers_predictions_analysis_and_reloadable_model(tmp_path):
    done = run_module("tui.demo.train", "--val-every", "10",
                      env=itera_env(tmp_path, ITERA_MAX_STEPS="30"))
    assert done.returncode == 0, done.stderr
    logged = records(tmp_path)
    assert logged[0]["step"] == 0 and logged[0]["truncated"] > 0
    assert [r["step"] for r in logged if "loss" in r] == list(range(1, 31))
    assert [r["step"] for r in logged if "val_acc" in r] == [10, 20, 30]
    assert any(r.get("event") == "checkpoint" and r["step"] == 30 for r in logged)

    predictions = [json.loads(x) for x in (tmp_path / "predictions.jsonl").read_text().splitlines()]
    assert len(predictions) == 400
    assert set(predictions[0]) == {"id", "label", "prediction", "confidence"}
    analysis = json.loads((tmp_path / "error_analysis.json").read_text())
    assert len(analysis["confusion_matrix"]["matrix"]) == corpus.NUM_CLASSES
    assert 0 < len(analysis["worst_mistakes"]) <= 10 and analysis["accuracy_by_length"]

    from tui import training
    from tui.demo.model import from_meta

    artifact = training.load_artifact(tmp_path / "model.pt")
    from_meta(artifact["meta"]).load_state_dict(artifact["state_dict"])
    assert artifact["meta"]["hyperparameters"]["lr"] == 3e-3


# Only a guard against a hung child, never what decides the outcome: the stop is sent
# when the records show the loss went non-finite, however long torch takes to import
# on a loaded box, and the script then waits a minute to be stopped.
HANG_GUARD_S = 300


def non_finite_tail(losses: list[dict]) -> list[dict]:
    """The loss records from the first non-finite one on."""
    bad = [i for i, r in enumerate(losses) if not math.isfinite(r["loss"])]
    return losses[bad[0]:] if bad else []


@pytest.mark.slow
def test_exploratory_lr_goes_non_finite_and_exits_3_when_stopped(tmp_path):
    from tui.demo.train import STEPS_AFTER_NON_FINITE

    stderr = tmp_path / "stderr.log"  # a file, not a pipe nobody drains while we wait
    with stderr.open("wb") as err:
        proc = subprocess.Popen([sys.executable, "-m", "tui.demo.train", "--lr", "3e3"],
                                env=itera_env(tmp_path, ITERA_MAX_STEPS="100"),
                                stdout=subprocess.DEVNULL, stderr=err)
    try:
        # stop it once it has logged its few steps after the non-finite one: it is then
        # waiting to be stopped, whatever the load of the box
        deadline = time.monotonic() + HANG_GUARD_S
        losses: list[dict] = []
        while proc.poll() is None:
            losses = [r for r in records(tmp_path) if "loss" in r]
            if len(non_finite_tail(losses)) >= 1 + STEPS_AFTER_NON_FINITE:
                break
            assert time.monotonic() < deadline, f"no non-finite loss in {HANG_GUARD_S} s"
            time.sleep(0.2)
        assert proc.poll() is None, (f"the run ended by itself (exit {proc.returncode}) "
                                     f"instead of waiting to be stopped: {stderr.read_text()}")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 3, stderr.read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    tail = non_finite_tail(losses)
    assert tail[0]["step"] <= 50
    assert len({r["lr"] for r in tail}) == 1  # neither optimizer nor scheduler stepped again
    assert not (tmp_path / "model.pt").exists()


@pytest.mark.slow
def test_resume_reproduces_the_uninterrupted_losses_bitwise(tmp_path):
    done = run_module("tui.training.resume_check", "--save-at", "10", "--steps", "10", "--",
                      sys.executable, "-m", "tui.demo.train",
                      env=itera_env(tmp_path), timeout=90)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "bitwise identical" in done.stdout
