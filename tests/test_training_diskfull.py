"""A checkpoint save on a full disk: a clear error naming the disk and the file,
no temporary file left, the previous checkpoint still loads, and the engine
reads a `checkpoint_failed` event that says so. On a real 2 MB tmpfs (needs
root and mount; skipped with the reason otherwise)."""

import errno
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from tui import training
from tui.training.atomic import sidecar_path, verify_hash

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers


@pytest.fixture
def small_disk(tmp_path):
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command here")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount_point)],
                          capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=30)


def attach(root: Path):
    return training.attach(env={"ITERA_RUN_DIR": str(root), "ITERA_METRICS": str(root / "metrics.jsonl")},
                           checkpoint_on_sigterm=False)


def failures(root: Path) -> list[dict]:
    return [r for r in map(json.loads, (root / "metrics.jsonl").read_text().splitlines())
            if r.get("event") == "checkpoint_failed"]


def assert_previous_checkpoint_intact(root: Path, previous) -> None:
    assert sorted(p.name for p in (root / "checkpoints").iterdir()) == ["step-000001.pt", "step-000001.pt.json"]
    payload = training.load_checkpoint(previous.path, restore_rng=False)
    assert payload["step"] == 1
    assert verify_hash(previous.path, json.loads(sidecar_path(previous.path).read_text()))


def test_a_save_on_a_full_disk_says_so_and_keeps_the_previous_checkpoint(small_disk):
    run = attach(small_disk)
    previous = run.save_checkpoint(model=torch.nn.Linear(16, 16), step=1)
    too_big = {"w": torch.ones(1 << 20)}  # 4 MB on a 2 MB disk
    target = small_disk / "checkpoints" / "step-000002.pt"
    with pytest.raises(OSError) as caught:
        run.save_checkpoint(model=too_big, step=2)
    assert caught.value.errno == errno.ENOSPC
    assert "no space left on device writing step-000002.pt" in str(caught.value)
    assert str(target) in str(caught.value) and "unexpected pos" not in str(caught.value)
    assert_previous_checkpoint_intact(small_disk, previous)

    run.save_checkpoint(model=too_big, step=3, async_=True)
    with pytest.raises(training.CheckpointError, match="no space left on device writing step-000003.pt"):
        run.wait_for_checkpoint()
    assert [(f["step"], f["path"]) for f in failures(small_disk)] == [(2, "checkpoints/step-000002.pt"),
                                                                     (3, "checkpoints/step-000003.pt")]
    assert all(f["error"].startswith("OSError: no space left on device writing step-00000")
               and "of it written" in f["error"] and str(small_disk) not in f["error"]
               for f in failures(small_disk))
    assert_previous_checkpoint_intact(small_disk, previous)


def test_a_sidecar_that_does_not_fit_leaves_the_previous_pair_in_place(small_disk):
    run = attach(small_disk)
    previous = run.save_checkpoint(model=torch.nn.Linear(16, 16), step=1)
    state = {"w": torch.ones(100_000)}
    probe = run.save_checkpoint(model=state, step=2, path=small_disk / "probe.pt")
    size = probe.bytes
    probe.path.unlink()
    sidecar_path(probe.path).unlink()
    page = 4096
    filler = small_disk / "filler"
    filler.write_bytes(b"\0" * (shutil.disk_usage(small_disk).free - -(-size // page) * page))
    assert shutil.disk_usage(small_disk).free < size + page  # room for the file, none for its sidecar
    with pytest.raises(OSError, match="no space left on device writing step-000002.pt.json"):
        run.save_checkpoint(model=state, step=2)
    assert_previous_checkpoint_intact(small_disk, previous)
    filler.unlink()  # space freed: the same save now works
    info = run.save_checkpoint(model=state, step=2)
    assert verify_hash(info.path, json.loads(sidecar_path(info.path).read_text()))
