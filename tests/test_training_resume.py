"""Process tests: a real training script resumed in a fresh process, the
resume_check command, and a live run answering SIGTERM and control requests."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from enginekit import wait_for
from tui import training

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

REPO = Path(__file__).resolve().parents[1]
SCRIPT = [sys.executable, str(REPO / "tests" / "training_script.py")]


def base_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITERA_")}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def run_script(run_dir: Path, args=(), **itera) -> list[dict]:
    env = base_env()
    env.update({"ITERA_RUN_ID": run_dir.name, "ITERA_RUN_DIR": str(run_dir),
                "ITERA_METRICS": str(run_dir / "metrics.jsonl"),
                "ITERA_CONTROL": str(run_dir / "control.jsonl")})
    env.update({f"ITERA_{k.upper()}": str(v) for k, v in itera.items()})
    done = subprocess.run(SCRIPT + list(args), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return read(run_dir / "metrics.jsonl")


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def steps(records, first, last) -> dict[int, dict]:
    return {r["step"]: r for r in records if "event" not in r and first <= r["step"] <= last}


def test_resume_in_a_fresh_process_is_bitwise_identical(tmp_path):
    full = run_script(tmp_path / "A", max_steps=20)
    first = run_script(tmp_path / "B", max_steps=10, checkpoint_at=10)
    [ack] = [r for r in first if r.get("event") == "checkpoint"]
    assert ack["step"] == 10 and ack["path"] == "checkpoints/step-000010.pt"
    checkpoint = tmp_path / "B" / ack["path"]
    payload = training.load_checkpoint(checkpoint, restore_rng=False)
    assert payload["data_state"] == {"epoch": 1, "index": 2}  # 8 batches per epoch
    assert set(payload["scaler"]) >= {"scale", "_growth_tracker"} and payload["scheduler"]["last_epoch"] == 10
    assert payload["optimizer"]["state"] and payload["rng"]["world_size"] == 1
    resumed = run_script(tmp_path / "C", max_steps=20, resume=checkpoint)
    expected, got = steps(full, 11, 20), steps(resumed, 11, 20)
    assert sorted(got) == list(range(11, 21))
    for step in range(11, 21):
        for key in ("loss", "lr", "scale"):
            assert got[step][key] == expected[step][key], (step, key)
    assert len({expected[s]["scale"] for s in expected}) > 1  # the scaler state matters
    assert not steps(resumed, 1, 10)  # C really started at step 11


def resume_check(tmp_path, *script_args):
    env = base_env()
    env["ITERA_METRICS"] = str(tmp_path / "caller.jsonl")
    cmd = [sys.executable, "-m", "tui.training.resume_check", "--save-at", "10", "--steps", "10", "--"]
    done = subprocess.run(cmd + SCRIPT + list(script_args), env=env, capture_output=True, text=True,
                          timeout=180, cwd=tmp_path)
    return done, read(tmp_path / "caller.jsonl")


def test_resume_check_passes_for_a_faithful_script(tmp_path):
    done, events = resume_check(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("resume check OK") and done.stdout.count("\n") == 1
    [event] = events
    assert event["event"] == "resume_check" and event["ok"] is True and event["step"] == 10
    assert event["steps_compared"] == 10 and event["max_abs_diff"] == 0
    assert "itera-resume-check" not in (tmp_path / "caller.jsonl").read_text()
    assert list(tmp_path.iterdir()) == [tmp_path / "caller.jsonl"]


def test_resume_check_fails_when_rng_state_is_not_restored(tmp_path):
    done, events = resume_check(tmp_path, "--no-restore-rng")
    assert done.returncode == 1
    assert "FAILED" in done.stdout and "differ from step 11" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr
    [event] = events
    assert event["ok"] is False and event["steps_compared"] == 10 and event["max_abs_diff"] > 0
    assert "differ from step 11" in event["problem"]


def test_resume_check_names_a_script_that_never_checkpoints(tmp_path):
    env = base_env()
    env["ITERA_METRICS"] = str(tmp_path / "caller.jsonl")
    logger = ("from tui import training; r = training.attach(); "
              "[r.log(s, loss=1.0) for s in range(1, r.max_steps + 1)]")
    done = subprocess.run([sys.executable, "-m", "tui.training.resume_check", "--save-at", "3", "--steps", "2",
                           "--", sys.executable, "-c", logger], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1 and "wrote no checkpoint at step 3" in done.stdout
    [event] = read(tmp_path / "caller.jsonl")
    assert event["ok"] is False and "no checkpoint at step 3" in event["problem"]
    assert event["max_abs_diff"] is None and event["steps_compared"] == 0


def records_when(predicate, path: Path, timeout: float = 60.0) -> list[dict]:
    """The run's records once `predicate(records)` holds (a line still being written is
    read again at the next poll)."""
    def ready():
        try:
            records = read(path) if path.exists() else []
        except json.JSONDecodeError:
            return None
        return records if predicate(records) else None

    return wait_for(ready, timeout, what=f"the records {path.name} should hold")


def start_live(run_dir: Path, *args) -> subprocess.Popen:
    env = base_env()
    env.update({"ITERA_RUN_ID": "live", "ITERA_RUN_DIR": str(run_dir),
                "ITERA_METRICS": str(run_dir / "metrics.jsonl"), "ITERA_CONTROL": str(run_dir / "control.jsonl")})
    run_dir.mkdir()
    return subprocess.Popen(SCRIPT + ["--steps", "100000", "--sleep", "0.02", *args], env=env,
                            stderr=open(run_dir / "stderr.txt", "w"), start_new_session=True)


def test_sigterm_makes_a_live_run_checkpoint_and_exit(tmp_path):
    proc = start_live(tmp_path / "run", "--async-save")
    try:
        records_when(lambda rs: any(r.get("step", 0) >= 3 for r in rs),
                     tmp_path / "run" / "metrics.jsonl")
        os.kill(proc.pid, signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    records = read(tmp_path / "run" / "metrics.jsonl")
    stop = [r for r in records if r.get("event") == "stop_requested"]
    [ack] = [r for r in records if r.get("event") == "checkpoint"]
    last_step = max(r["step"] for r in records if "event" not in r)
    assert stop[0]["reason"] == "sigterm" and ack["step"] == last_step and ack["mode"] == "async"
    payload = training.load_checkpoint(tmp_path / "run" / ack["path"], restore_rng=False)
    assert payload["step"] == last_step


def test_control_requests_reach_a_live_run(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_live(run_dir)
    metrics, control = run_dir / "metrics.jsonl", run_dir / "control.jsonl"
    try:
        records_when(lambda rs: any(r.get("step", 0) >= 2 for r in rs), metrics)
        with open(control, "a") as f:
            f.write(json.dumps({"seq": 1, "request": "checkpoint", "t": time.time()}) + "\n")
        records = records_when(lambda rs: any(r.get("event") == "checkpoint" for r in rs), metrics)
        assert [r["request_seq"] for r in records if r.get("event") == "checkpoint"] == [1]
        with open(control, "a") as f:
            f.write(json.dumps({"seq": 2, "request": "stop", "t": time.time()}) + "\n")
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    records = read(metrics)
    acks = [r for r in records if r.get("event") == "checkpoint"]
    assert [a["request_seq"] for a in acks] == [1, None]
    assert [r["request_seq"] for r in records if r.get("event") == "stop_requested"] == [2]
    assert torch.load(run_dir / acks[-1]["path"], weights_only=True)["step"] == acks[-1]["step"]
