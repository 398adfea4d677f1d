"""kill -9 in the middle of save_checkpoint, 20 times at random moments: the file
under the final name is always a complete checkpoint, and a sidecar never
describes other bytes than its file.

Children are forked from a forkserver that has torch imported already, so each
of the 20 real processes starts in milliseconds instead of seconds.

The kill delays come from a seed printed at the start (shown with a failure);
``ITERA_CRASH_SEED=N`` replays the same delays (the moments they land in still
depend on how fast the machine writes).
"""

import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest
import torch

from tui import training
from tui.training.atomic import verify_hash

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

TENSORS, NUMEL = 8, 1 << 20  # 8 x 4 MB = 32 MB of state
DEADLINE_S = 240  # the whole test; a wait past it is a failure, not a hang


def save_forever(directory: str, metrics: str, started) -> None:
    """Child: overwrite latest.pt with steps 1, 2, 3... until killed."""
    torch.set_num_threads(1)
    run = training.attach(env={"ITERA_RUN_DIR": directory, "ITERA_METRICS": metrics},
                          checkpoint_on_sigterm=False)
    state = {f"w{i}": torch.empty(NUMEL) for i in range(TENSORS)}
    started.set()
    step = 0
    while True:
        step += 1
        for tensor in state.values():
            tensor.fill_(step)
        run.save_checkpoint(model=state, step=step, path=Path(directory) / "latest.pt")


def acked_steps(metrics: Path) -> list[int]:
    if not metrics.exists():
        return []
    return [json.loads(line)["step"] for line in metrics.read_text().splitlines()
            if line.endswith("}") and json.loads(line).get("event") == "checkpoint"]


def assert_consistent(directory: Path) -> tuple[int, bool]:
    """(step of the checkpoint under the final name, whether its sidecar was checked)."""
    target = directory / "latest.pt"
    payload = training.load_checkpoint(target, restore_rng=False)
    step = payload["step"]
    assert set(payload["model"]) == {f"w{i}" for i in range(TENSORS)}
    for tensor in payload["model"].values():
        assert tensor.numel() == NUMEL and bool((tensor == step).all())
    sidecar = directory / "latest.pt.json"
    checked = sidecar.exists()
    if checked:  # absent is allowed (killed between the two renames), wrong is not
        record = json.loads(sidecar.read_text())
        assert record["bytes"] == target.stat().st_size and record["step"] == step
        assert verify_hash(target, record)
    for entry in directory.iterdir():
        assert entry.name in {"latest.pt", "latest.pt.json"} or entry.name.startswith("metrics-") \
            or (entry.name.startswith(".latest.pt") and ".tmp-" in entry.name), entry.name
    return step, checked


def test_kill_9_during_save_never_leaves_a_partial_checkpoint(tmp_path):
    seed = int(os.environ.get("ITERA_CRASH_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"crash test seed {seed} (replay: ITERA_CRASH_SEED={seed})")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "tui.training"])
    chance = random.Random(seed)
    deadline = time.monotonic() + DEADLINE_S
    kills_during_writes = sidecars_checked = 0
    previous_step = None
    for attempt in range(20):
        where = f"seed {seed}, kill {attempt}"
        metrics = tmp_path / f"metrics-{attempt}.jsonl"
        started = context.Event()
        child = context.Process(target=save_forever, args=(str(tmp_path), str(metrics), started))
        child.start()
        try:
            assert started.wait(max(1.0, deadline - time.monotonic())), f"child did not start ({where})"
            if attempt == 0:  # the first child must leave a checkpoint to protect
                while not acked_steps(metrics):
                    assert time.monotonic() < deadline, f"no checkpoint acknowledged in time ({where})"
                    time.sleep(0.005)
            time.sleep(chance.uniform(0.0, 0.25))
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.join(10)
        assert child.exitcode == -signal.SIGKILL, where
        acked = acked_steps(metrics)
        step, checked = assert_consistent(tmp_path)
        sidecars_checked += checked
        if acked:  # the newest ack, or the save after it if it got as far as the rename
            assert step in (acked[-1], acked[-1] + 1), (step, acked[-1], where)
        else:  # killed during its first save: the previous child's file, or step 1
            assert step in (previous_step, 1), (step, previous_step, where)
        kills_during_writes += any(".tmp-" in p.name for p in tmp_path.iterdir())
        previous_step = step
    print(f"{kills_during_writes} of 20 kills inside a write, {sidecars_checked} sidecars checked")
    assert kills_during_writes >= 5, f"the kills did not land inside writes (seed {seed})"
    assert sidecars_checked >= 1, f"no sidecar was there to check in 20 kills (seed {seed})"
    # The next save cleans up the temp files of the dead writers.
    run = training.attach(env={"ITERA_RUN_DIR": str(tmp_path), "ITERA_METRICS": str(tmp_path / "metrics-x")},
                          checkpoint_on_sigterm=False)
    run.save_checkpoint(model={"w": torch.zeros(2)}, step=99, path=tmp_path / "latest.pt")
    assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
