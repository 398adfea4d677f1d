"""Two real ranks (gloo on CPU): they agree on when to checkpoint, only rank 0
writes, and each rank gets its own RNG state back."""

import json
import time
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

REPO = Path(__file__).resolve().parents[1]

WORKER = """
import json, torch, torch.distributed as dist
from tui import training
dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(100 + rank)
run = training.attach()
model = torch.nn.Linear(4, 4)
requested = run.checkpoint_requested(5)
info = run.save_checkpoint(model=model, step=5)
after_save = torch.rand(3).tolist()
dist.barrier()
torch.manual_seed(999)
payload = training.load_checkpoint(info.path, model=model)
print(json.dumps({"rank": rank, "requested": requested, "wrote": info.done,
                  "draw": after_save, "redraw": torch.rand(3).tolist(),
                  "ranks_saved": payload["rng"]["world_size"]}))
dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_two_ranks_checkpoint_together_and_restore_their_own_rng(tmp_path):
    control = tmp_path / "control-0.jsonl"
    control.write_text(json.dumps({"seq": 1, "request": "checkpoint", "t": time.time()}) + "\n")
    port = free_port()
    procs = []
    for rank in range(2):
        env = {k: v for k, v in os.environ.items() if not k.startswith("ITERA_")}
        env.update({"PYTHONPATH": str(REPO), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                    "RANK": str(rank), "WORLD_SIZE": "2", "ITERA_RUN_DIR": str(tmp_path),
                    "ITERA_METRICS": str(tmp_path / f"metrics-{rank}.jsonl"),
                    # only rank 0 sees the request: the all_reduce must carry it to rank 1
                    "ITERA_CONTROL": str(tmp_path / f"control-{rank}.jsonl")})
        procs.append(subprocess.Popen([sys.executable, "-c", WORKER], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True))
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    zero, one = results
    assert zero["requested"] is True and one["requested"] is True
    assert zero["wrote"] is True and one["wrote"] is False
    assert zero["ranks_saved"] == 2
    assert zero["draw"] == zero["redraw"] and one["draw"] == one["redraw"]
    assert zero["draw"] != one["draw"]
    acks = [json.loads(line) for line in (tmp_path / "metrics-0.jsonl").read_text().splitlines()]
    assert [a["request_seq"] for a in acks if a.get("event") == "checkpoint"] == [1]
    assert not (tmp_path / "metrics-1.jsonl").exists()
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir()) == ["step-000005.pt",
                                                                           "step-000005.pt.json"]
