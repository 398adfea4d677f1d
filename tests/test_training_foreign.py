"""The SDK's side of framework checkpoints: acknowledge a file or folder it did not
write, and never miss a request that a SIGTERM overtook."""

import json
import os
import signal
import time
from pathlib import Path

from tui import training
from tui.campaign.files import sha256_file, sha256_tree


def managed(tmp_path: Path) -> dict:
    run = tmp_path / "run"
    return {"ITERA_RUN_ID": "v-1", "ITERA_RUN_DIR": str(run),
            "ITERA_METRICS": str(run / "metrics.jsonl"), "ITERA_CONTROL": str(run / "control.jsonl")}


def events(tmp_path: Path) -> list[dict]:
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if "event" in line]


def request(tmp_path: Path, seq: int, what: str) -> None:
    with open(tmp_path / "run" / "control.jsonl", "a") as f:
        f.write(json.dumps({"seq": seq, "request": what, "t": time.time()}) + "\n")


def test_a_framework_folder_and_file_are_acknowledged_with_the_request(tmp_path):
    run = training.attach(env=managed(tmp_path), checkpoint_on_sigterm=False)
    folder = run.run_dir / "out" / "checkpoint-12"
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"w" * 300)
    (folder / "trainer_state.json").write_text("{}")
    request(tmp_path, 1, "checkpoint")
    assert run.checkpoint_requested(12)
    info = run.acknowledge_checkpoint(folder, step=12, mode="hf", write_s=0.25)
    assert not run.checkpoint_requested(12)  # the request was taken
    ckpt = run.run_dir / "last.ckpt"
    ckpt.write_bytes(b"lightning")
    run.acknowledge_checkpoint(ckpt, step=13, mode="lightning")
    first, second = events(tmp_path)
    assert {k: first[k] for k in ("event", "step", "path", "sha256", "bytes", "mode",
                                  "request_seq", "write_s")} == {
        "event": "checkpoint", "step": 12, "path": "out/checkpoint-12",
        "sha256": sha256_tree(folder)[0], "bytes": 302, "mode": "hf", "request_seq": 1,
        "write_s": 0.25}
    assert (info.sha256, info.bytes, info.request_seq) == (first["sha256"], 302, 1)
    assert (second["path"], second["sha256"], second["request_seq"]) == (
        "last.ckpt", sha256_file(ckpt)[0], None)


def test_a_problem_is_a_checkpoint_failed_event_not_an_exception(tmp_path):
    run = training.attach(env=managed(tmp_path), checkpoint_on_sigterm=False)
    folder = run.run_dir / "checkpoint-3"
    folder.mkdir(parents=True)
    (folder / "link").symlink_to("/etc/hostname")
    assert run.acknowledge_checkpoint(run.run_dir / "missing.ckpt", step=2, mode="lightning") is None
    assert run.acknowledge_checkpoint(folder, step=3, mode="hf") is None
    missing, linked = events(tmp_path)
    assert missing["event"] == linked["event"] == "checkpoint_failed"
    assert missing["path"] == "missing.ckpt" and "No such file" in missing["error"]
    assert linked["path"] == "checkpoint-3" and "symbolic link" in linked["error"]
    assert str(tmp_path) not in json.dumps([missing, linked])


def test_a_request_written_just_before_sigterm_is_seen_at_once(tmp_path):
    previous = signal.getsignal(signal.SIGTERM)
    try:
        run = training.attach(env=managed(tmp_path), checkpoint_on_sigterm=True)
        run.run_dir.mkdir(parents=True, exist_ok=True)
        assert not run.checkpoint_requested(1)  # polled now: the next poll is 0.5 s away
        request(tmp_path, 1, "checkpoint")  # what a wrap-up does, in this order
        request(tmp_path, 2, "stop")
        os.kill(os.getpid(), signal.SIGTERM)
        assert run.stop_requested()
        assert run.checkpoint_requested(1)  # not left for a poll that may never come
    finally:
        signal.signal(signal.SIGTERM, previous)
