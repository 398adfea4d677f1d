"""In-process tests of the training SDK: metrics, requests, signals, saves, artifacts."""

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from tui import training
from tui.training import atomic, digest
from tui.training.control import ControlReader, process_start_time

REPO = Path(__file__).resolve().parents[1]


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def managed_env(tmp_path: Path, **extra) -> dict:
    env = {"ITERA_RUN_ID": "v1-abc-1", "ITERA_RUN_DIR": str(tmp_path / "run"),
           "ITERA_METRICS": str(tmp_path / "run" / "metrics.jsonl"),
           "ITERA_CONTROL": str(tmp_path / "run" / "control.jsonl")}
    env.update(extra)
    return env


def append_request(path: Path, seq: int, request: str, *, torn_tail: str = "",
                   at: float | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = time.time() if at is None else at
    with open(path, "a") as f:
        f.write(json.dumps({"seq": seq, "request": request, "t": stamp}) + "\n" + torn_tail)


@pytest.mark.slow
def test_import_does_not_import_torch_and_logging_works_without_it(tmp_path):
    code = ("import sys; from tui import training; run = training.attach(); "
            "print(run.log(1, loss=0.5), run.managed, 'torch' in sys.modules)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITERA_")}
    env["PYTHONPATH"] = str(REPO)
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "False", "False"]
    assert records(tmp_path / "itera-metrics.jsonl")[0]["loss"] == 0.5


def test_attach_outside_itera_writes_local_metrics_and_leaves_sigterm_alone(tmp_path, monkeypatch):
    for name in list(os.environ):
        if name.startswith("ITERA_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
    before = signal.getsignal(signal.SIGTERM)
    run = training.attach()
    assert (run.managed, run.run_id, run.max_steps, run.resume_from) == (False, "local", None, None)
    assert run.checkpoint_requested(3) is False and run.stop_requested() is False
    run.log(3, loss=1.25, acc=torch.tensor(0.5))
    assert signal.getsignal(signal.SIGTERM) is before
    [record] = records(tmp_path / "itera-metrics.jsonl")
    assert (record["step"], record["loss"], record["acc"]) == (3, 1.25, 0.5)
    assert run.default_checkpoint_path(10) == tmp_path / "checkpoints" / "step-000010.pt"
    explicit = training.attach(metrics_path=tmp_path / "elsewhere.jsonl")
    explicit.log(1, loss=2.0)
    assert records(tmp_path / "elsewhere.jsonl")[0]["loss"] == 2.0


def test_an_unwritable_metrics_file_warns_once_and_never_stops_training(tmp_path, capsys):
    (tmp_path / "a-file").write_text("")
    run = training.attach(metrics_path=tmp_path / "a-file" / "metrics.jsonl")
    assert run.log(1, loss=1.0) is True and run.log(2, loss=float("nan")) is False
    run.event("anything")
    assert capsys.readouterr().err.count("cannot write metrics") == 1


def test_attach_reads_the_protocol_variables(tmp_path):
    run = training.attach(env=managed_env(tmp_path, ITERA_MAX_STEPS="30", ITERA_RESUME="ck/step-000010.pt",
                                          ITERA_CHECKPOINT_AT="5, 10"), checkpoint_on_sigterm=False)
    assert (run.run_id, run.run_dir, run.managed) == ("v1-abc-1", tmp_path / "run", True)
    assert (run.max_steps, run.resume_from) == (30, Path("ck/step-000010.pt"))
    assert [run.checkpoint_requested(s) for s in (4, 5, 6, 10)] == [False, True, False, True]


def test_log_flags_non_finite_values_and_still_writes_them(tmp_path):
    env = managed_env(tmp_path)
    run = training.attach(env=env, checkpoint_on_sigterm=False)
    assert run.log(1, loss=2.5, grad_norm=torch.tensor(1.0)) is True
    assert run.log(2, loss=float("nan")) is False
    assert run.log(3, loss=torch.tensor(float("inf"))) is False
    strict = training.attach(env=env, raise_on_non_finite=True, checkpoint_on_sigterm=False)
    with pytest.raises(training.NonFiniteMetric, match="step 4: loss"):
        strict.log(4, loss=float("-inf"), acc=0.9)
    lines = Path(env["ITERA_METRICS"]).read_text().splitlines()
    assert "NaN" in lines[1] and "Infinity" in lines[2] and "-Infinity" in lines[3]
    assert math.isnan(json.loads(lines[1])["loss"])
    with pytest.raises(ValueError, match="reserved"):
        run.log(5, t=1.0)


def test_event_records_carry_the_last_step(tmp_path):
    env = managed_env(tmp_path)
    run = training.attach(env=env, checkpoint_on_sigterm=False)
    run.log(7, loss=1.0)
    run.event("data_check", truncated=0)
    record = records(Path(env["ITERA_METRICS"]))[-1]
    assert (record["event"], record["step"], record["truncated"]) == ("data_check", 7, 0)


def test_control_reader_waits_for_torn_lines_and_ignores_duplicates(tmp_path):
    path = tmp_path / "control.jsonl"
    clock = [100.0]
    reader = ControlReader(path, clock=lambda: clock[0])
    reader.poll()  # no file yet: nothing, no error
    append_request(path, 1, "checkpoint", torn_tail='{"seq": 2, "requ')
    reader.poll()
    assert reader.pending_checkpoint is None  # looked 0 s ago: the file is not even stat'ed
    clock[0] += 0.6
    reader.poll()
    assert reader.pending_checkpoint == 1 and reader.bad_lines == 0
    assert reader.take_checkpoint_request() == 1 and reader.pending_checkpoint is None
    with open(path, "a") as f:
        f.write('est": "stop", "t": 1.0}\n' + json.dumps({"seq": 1, "request": "checkpoint"}) + "\n")
    clock[0] += 0.6
    reader.poll()
    assert reader.stop_seq == 2 and reader.pending_checkpoint is None  # seq 1 again is a duplicate
    stale = ControlReader(path, ignore_before=time.time() + 60)
    stale.poll()
    assert stale.stop_seq is None and stale.pending_checkpoint is None


def test_a_request_made_before_the_script_started_is_for_this_attempt(tmp_path):
    """The script is the engine's grandchild: on a busy box (or under torchrun) it starts
    seconds after the launch the engine recorded, and a `c` pressed in between used to be
    dropped as an earlier attempt's. The cut-off is the launch (ITERA_LAUNCHED_AT, the
    clock that stamps requests); a request older than the launch is still ignored."""
    started = process_start_time()
    assert started is not None
    launched = started - 20  # this process "started" 20 s after its attempt was launched
    env = managed_env(tmp_path, ITERA_LAUNCHED_AT=repr(launched))
    control = Path(env["ITERA_CONTROL"])
    append_request(control, 1, "stop", at=launched - 5)  # the stop that ended the last one
    append_request(control, 2, "checkpoint", at=launched + 10)  # pressed while it loaded
    run = training.attach(env=env, checkpoint_on_sigterm=False)
    assert run.checkpoint_requested(1) is True
    assert run.stop_requested() is False
    by_hand = training.attach(env=managed_env(tmp_path), checkpoint_on_sigterm=False)
    assert by_hand.checkpoint_requested(1) is False  # no launch stamp: its own start


def test_a_launch_stamp_that_is_not_a_time_is_said_and_ignored(tmp_path, capsys):
    env = managed_env(tmp_path, ITERA_LAUNCHED_AT="soon")
    append_request(Path(env["ITERA_CONTROL"]), 1, "checkpoint", at=time.time() - 3600)
    run = training.attach(env=env, checkpoint_on_sigterm=False)
    assert "ITERA_LAUNCHED_AT" in capsys.readouterr().err
    assert run.checkpoint_requested(1) is False  # an hour old: before this process


def test_checkpoint_request_from_control_file_is_acknowledged(tmp_path):
    env = managed_env(tmp_path)
    run = training.attach(env=env, checkpoint_on_sigterm=False)
    model = torch.nn.Linear(3, 2)
    assert run.checkpoint_requested(1) is False
    append_request(Path(env["ITERA_CONTROL"]), 4, "checkpoint")
    run._control._last_poll = float("-inf")  # skip the 0.5 s throttle instead of sleeping
    assert run.checkpoint_requested(2) is True
    info = run.save_checkpoint(model=model, step=2)
    assert info.request_seq == 4 and info.done and info.mode == "sync"
    assert run.checkpoint_requested(3) is False
    ack = records(Path(env["ITERA_METRICS"]))[-1]
    assert ack["event"] == "checkpoint" and ack["request_seq"] == 4
    assert ack["path"] == "checkpoints/step-000002.pt" and not os.path.isabs(ack["path"])
    assert ack["digest"] == info.digest and ack["bytes"] == (tmp_path / "run" / ack["path"]).stat().st_size
    side = json.loads((tmp_path / "run" / "checkpoints" / "step-000002.pt.json").read_text())
    assert (side["kind"], side["step"], side["digest"], side["file"]) == ("checkpoint", 2, info.digest,
                                                                           "step-000002.pt")
    assert atomic.verify_hash(tmp_path / "run" / ack["path"], side)
    append_request(Path(env["ITERA_CONTROL"]), 5, "stop")
    run._control._last_poll = float("-inf")
    assert run.stop_requested() is True
    assert records(Path(env["ITERA_METRICS"]))[-1]["event"] == "stop_requested"


def test_sigterm_turns_into_a_stop_request(tmp_path):
    previous = signal.getsignal(signal.SIGTERM)
    try:
        run = training.attach(env=managed_env(tmp_path))
        assert run.stop_requested() is False
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        assert run.stop_requested() is True
        assert records(run.metrics_path)[-1]["reason"] == "sigterm"
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_async_save_snapshots_state_and_reports_block_and_write_times(tmp_path):
    env = managed_env(tmp_path)
    run = training.attach(env=env, checkpoint_on_sigterm=False)
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.Linear(512, 512))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(4, 512)).sum().backward()
    optimizer.step()
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    pending = run.save_checkpoint(model=model, optimizer=optimizer, step=10, async_=True,
                                  data_state={"epoch": 0, "index": 10})
    with torch.no_grad():  # the loop goes on while the file is written
        for p in model.parameters():
            p.fill_(123.0)
    second = run.save_checkpoint(model=model, step=11, async_=True)  # waits for the first
    done = run.wait_for_checkpoint()
    assert pending.mode == "async" and not pending.done and pending.block_s > 0
    assert done.step == 11 and done.done and done.write_s > 0 and second.block_s > 0
    acks = [r for r in records(Path(env["ITERA_METRICS"])) if r.get("event") == "checkpoint"]
    assert [a["step"] for a in acks] == [10, 11]
    assert all(a["mode"] == "async" and a["block_s"] > 0 and a["write_s"] > 0 for a in acks)
    fresh = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.Linear(512, 512))
    payload = training.load_checkpoint(tmp_path / "run" / acks[0]["path"], model=fresh,
                                       optimizer=torch.optim.AdamW(fresh.parameters()))
    assert payload["step"] == 10 and payload["data_state"] == {"epoch": 0, "index": 10}
    for name, tensor in fresh.state_dict().items():
        assert torch.equal(tensor, expected[name])


def test_save_refuses_state_that_would_not_load_weights_only(tmp_path):
    import numpy as np

    run = training.attach(env=managed_env(tmp_path), checkpoint_on_sigterm=False)
    with pytest.raises(TypeError, match=r"data_state\['order'\].*numpy"):
        run.save_checkpoint(model=torch.nn.Linear(2, 2), step=1, data_state={"order": np.arange(3)})
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_checkpoint_restores_rng_states(tmp_path):
    import random

    import numpy as np

    run = training.attach(env=managed_env(tmp_path), checkpoint_on_sigterm=False)
    info = run.save_checkpoint(model=torch.nn.Linear(2, 2), step=1)
    draws = (random.random(), float(np.random.rand()), torch.rand(2).tolist())
    random.seed(5), np.random.seed(5), torch.manual_seed(5)
    training.load_checkpoint(info.path)
    assert (random.random(), float(np.random.rand()), torch.rand(2).tolist()) == draws


def test_artifact_round_trip(tmp_path):
    model = torch.nn.Linear(4, 3)
    info = training.save_artifact(tmp_path / "out" / "model.pt", state_dict=model,
                                  meta={"arch": "linear", "in": 4, "val_acc": 0.91})
    loaded = training.load_artifact(info.path)
    assert loaded["meta"] == {"arch": "linear", "in": 4, "val_acc": 0.91}
    assert all(torch.equal(loaded["state_dict"][k], v) for k, v in model.state_dict().items())
    side = json.loads((tmp_path / "out" / "model.pt.json").read_text())
    assert side["kind"] == "artifact" and side["sha256"] == info.sha256 and side["meta"]["arch"] == "linear"
    with pytest.raises(TypeError, match="JSON"):
        training.save_artifact(tmp_path / "bad.pt", state_dict=model, meta={"x": object()})
    with pytest.raises(training.CheckpointError, match="not an itera checkpoint"):
        training.load_checkpoint(info.path)


@pytest.mark.parametrize("algorithm", ["xxh3_128", "sha256"])
def test_the_digest_taken_while_writing_matches_the_bytes_on_disk(tmp_path, algorithm):
    obj = {"big": torch.randn(3 << 20), "odd": torch.randn(1001), "meta": {"k": [1, 2.5, "x"]}}
    result = atomic.write_torch_file(obj, tmp_path / "x.pt", kind="checkpoint", step=3, algorithm=algorithm)
    assert (result.digest, result.bytes) == atomic.file_digest(tmp_path / "x.pt", algorithm)
    assert result.digest.startswith(algorithm + ":") and result.bytes == (tmp_path / "x.pt").stat().st_size
    side = json.loads((tmp_path / "x.pt.json").read_text())
    assert atomic.sidecar_digest(side) == result.digest and atomic.verify_hash(tmp_path / "x.pt", side)
    # one digest field: sha256 sidecars keep the first format's, so older readers still check them
    hashed = {"sha256": result.sha256} if algorithm == "sha256" else {"digest": result.digest}
    assert {k: side[k] for k in ("sha256", "digest") if k in side} == hashed
    loaded = torch.load(tmp_path / "x.pt", weights_only=True)  # a valid zip, written without seek/tell
    assert torch.equal(loaded["big"], obj["big"]) and loaded["meta"] == obj["meta"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.pt", "x.pt.json"]
    data = bytearray((tmp_path / "x.pt").read_bytes())
    data[len(data) // 3] ^= 0x10
    (tmp_path / "x.pt").write_bytes(bytes(data))
    assert not atomic.verify_hash(tmp_path / "x.pt", side)


def test_checkpoints_use_xxh3_and_fall_back_to_sha256_without_xxhash(tmp_path, monkeypatch):
    env = managed_env(tmp_path)
    run = training.attach(env=env, checkpoint_on_sigterm=False)
    fast = run.save_checkpoint(model=torch.nn.Linear(3, 2), step=1)
    assert fast.digest.startswith("xxh3_128:") and fast.sha256 is None and fast.done
    monkeypatch.setitem(sys.modules, "xxhash", None)  # as if the package were not installed
    plain = run.save_checkpoint(model=torch.nn.Linear(3, 2), step=2)
    assert plain.digest == "sha256:" + plain.sha256 and plain.done
    assert plain.sha256 == atomic.file_sha256(plain.path)[0]
    acks = [r for r in records(Path(env["ITERA_METRICS"])) if r.get("event") == "checkpoint"]
    assert "sha256" not in acks[0] and acks[0]["digest"] == fast.digest
    assert acks[1]["sha256"] == plain.sha256 and acks[1]["digest"] == plain.digest
    fast_side = json.loads(atomic.sidecar_path(fast.path).read_text())
    with pytest.raises(digest.DigestUnavailable, match="pip install xxhash"):
        atomic.verify_hash(fast.path, fast_side)
    assert atomic.sidecar_digest({"sha256": "ab"}) == "sha256:ab"  # a sidecar of the first format
    with pytest.raises(ValueError, match="no digest"):
        atomic.verify_hash(plain.path, {"bytes": 1})


def test_a_failed_save_is_reported_without_machine_paths(tmp_path):
    env = managed_env(tmp_path)
    run = training.attach(env=env, checkpoint_on_sigterm=False)
    blocker = tmp_path / "run" / "checkpoints"
    blocker.parent.mkdir(parents=True)
    blocker.write_text("a file where the checkpoint directory should be")
    with pytest.raises(OSError):
        run.save_checkpoint(model=torch.nn.Linear(2, 2), step=3)
    run.save_checkpoint(model=torch.nn.Linear(2, 2), step=4, async_=True)
    with pytest.raises(training.CheckpointError):
        run.wait_for_checkpoint()
    failures = [r for r in records(Path(env["ITERA_METRICS"])) if r.get("event") == "checkpoint_failed"]
    assert [(f["step"], f["path"]) for f in failures] == [(3, "checkpoints/step-000003.pt"),
                                                        (4, "checkpoints/step-000004.pt")]
    assert str(tmp_path) not in Path(env["ITERA_METRICS"]).read_text()


def _durability_steps(monkeypatch, directory):
    """The fsyncs (of the file, its sidecar or the directory) and renames a write makes, in order."""
    steps = []
    real_fsync, real_replace, real_unlink = os.fsync, os.replace, Path.unlink

    def fsync(fd):
        target = Path(os.readlink(f"/proc/self/fd/{fd}"))
        steps.append(("fsync", "dir" if target == directory else
                      "sidecar" if ".json" in target.name else "file"))
        return real_fsync(fd)

    def replace(src, dst):
        steps.append(("replace", "sidecar" if str(dst).endswith(".json") else "file"))
        return real_replace(src, dst)

    def unlink(self, missing_ok=False):
        if self.name.endswith(".json") and self.parent == directory:
            steps.append(("unlink", "sidecar"))
        return real_unlink(self, missing_ok=missing_ok)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(Path, "unlink", unlink)
    return steps


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names an fd's file through /proc")
def test_a_new_checkpoint_takes_three_fsyncs_and_a_replaced_one_keeps_its_order(tmp_path, monkeypatch):
    """Each fsync is a disk cache flush: a new file (each step-NNNNNN.pt) needs the file's,
    the sidecar's and one of the directory after both renames; replacing a file also syncs
    the directory between the renames, so no crash pairs the new sidecar with the old bytes."""
    path = tmp_path / "step-000001.pt"
    atomic.write_torch_file({"w": torch.ones(4)}, path, kind="checkpoint", step=1)  # sweeps the dir once
    path.unlink()
    atomic.sidecar_path(path).unlink()
    steps = _durability_steps(monkeypatch, tmp_path)
    atomic.write_torch_file({"w": torch.ones(4)}, path, kind="checkpoint", step=1)
    assert steps == [("fsync", "file"), ("fsync", "sidecar"), ("replace", "file"),
                     ("replace", "sidecar"), ("fsync", "dir")]
    steps.clear()
    atomic.write_torch_file({"w": torch.zeros(4)}, path, kind="checkpoint", step=2)
    assert steps == [("fsync", "file"), ("fsync", "sidecar"), ("unlink", "sidecar"), ("fsync", "dir"),
                     ("replace", "file"), ("fsync", "dir"), ("replace", "sidecar"), ("fsync", "dir")]
    assert atomic.verify_hash(path, json.loads(atomic.sidecar_path(path).read_text()))
