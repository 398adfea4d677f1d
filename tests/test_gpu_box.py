"""On a GPU box: a checkpoint of CUDA tensors and the engine with the real NVML.

Everywhere else the tests run on CPU tensors and an NVML stand-in (tests/fake_pynvml.py).
These run only where there is an NVIDIA driver and torch sees CUDA (`bench/gpu_box.sh`
runs them on a lent GPU machine); elsewhere they are skipped, saying why.

- The SDK saves a model and an optimizer whose tensors live on the GPU, with the CUDA
  generator's state; the engine's verifier, a process that never initialises CUDA (here
  with every GPU hidden, as on the CPU box a bundle is reloaded on), verifies it; it
  reloads on the GPU with the same weights and the same next random number, and on a
  CPU-only process as well.
- The engine, with the probes the daemon samples (the real `pynvml`), stops a run that
  holds its GPU idle for the `gpu_idle` window, after asking it for a checkpoint, which
  the run saves from CUDA and the verifier accepts.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO
from enginekit import copy_scripts, script_cmd, write_plan
from test_probes_gpu import HAS_DRIVER, NEEDS_A_GPU

CUDA = NEEDS_A_GPU + " and torch with CUDA"
pytestmark = [pytest.mark.slow, pytest.mark.skipif(not HAS_DRIVER, reason=CUDA)]

RELOAD = """
import json, sys, torch
from tui import training
path, device = sys.argv[1], sys.argv[2]
torch.manual_seed(1)  # other weights than the saved ones: the load must replace them
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 4)).to(device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
payload = training.load_checkpoint(path, model=model, optimizer=optimizer,
                                   map_location=device)
state = optimizer.state_dict()["state"]
print(json.dumps({
    "step": payload["step"],
    "weights": [float(p.double().sum()) for p in model.parameters()],
    "param_device": str(next(model.parameters()).device),
    "optimizer_device": str(state[0]["exp_avg"].device),
    "draw": torch.rand(1, device="cuda").item() if device == "cuda" else None,
    "cuda_available": torch.cuda.is_available(),
}))
"""


def _cuda_or_skip() -> None:
    probe = subprocess.run([sys.executable, "-c", "import torch; print(torch.cuda.is_available())"],
                           capture_output=True, text=True, timeout=300)
    if probe.stdout.strip() != "True":
        pytest.skip("torch.cuda is not available here: " + CUDA)


def _env(**extra: str) -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(REPO), **extra)


def _reload(path: Path, device: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", RELOAD, str(path), device],
                         capture_output=True, text=True, timeout=300, env=_env(**env))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_checkpoint_of_cuda_tensors_is_verified_without_a_gpu_and_reloads_on_both(
        tmp_path, mode):
    _cuda_or_skip()
    copy_scripts(tmp_path)
    args = ["--busy-steps", "12"] + (["--async-save"] if mode == "async" else [])
    saved = subprocess.run([sys.executable, "scripts/cuda_train.py", *args], cwd=tmp_path,
                           capture_output=True, text=True, timeout=300, env=_env())
    assert saved.returncode == 0, saved.stderr[-3000:]
    said = re.search(r"saved step 12 at (\S+) cuda-draw=(\S+)", saved.stdout)
    assert said, saved.stdout[-2000:]
    path, draw = tmp_path / said.group(1), float(said.group(2))

    # the engine's verifier: an isolated process, here with no GPU visible at all
    verified = subprocess.run(
        [sys.executable, "-P", "-m", "tui.training.file_check", "--json", str(path)],
        capture_output=True, text=True, timeout=300, cwd="/",
        env=_env(CUDA_VISIBLE_DEVICES=""))
    verdict = json.loads(verified.stdout)
    assert verdict["ok"], verdict["problem"]
    assert (verdict["kind"], verdict["step"]) == ("checkpoint", 12)

    on_gpu = _reload(path, "cuda")
    assert on_gpu["step"] == 12
    assert on_gpu["param_device"].startswith("cuda") and \
        on_gpu["optimizer_device"].startswith("cuda")
    assert on_gpu["draw"] == draw  # the CUDA generator came back with the weights
    on_cpu = _reload(path, "cpu", CUDA_VISIBLE_DEVICES="")
    assert not on_cpu["cuda_available"]
    assert on_cpu["param_device"] == "cpu" and on_cpu["weights"] == pytest.approx(
        on_gpu["weights"], rel=1e-6)


def test_the_engine_with_the_real_nvml_stops_a_run_idle_on_its_gpu_after_its_checkpoint(
        tmp_path):
    """The daemon's own pieces in one process: a CampaignSession sampling the real
    probes (pynvml) every second, the engine judging `gpu_idle` on them."""
    from enginekit import step_to_the_end, step_until
    from tui.campaign import load_plan
    from tui.engine import Engine, read_ledger
    from tui.probes import HostProbe, NvmlProbe, Probes
    from tui.session.session import CampaignSession

    _cuda_or_skip()
    path = write_plan(tmp_path, f"""
[[variant]]
id = "control"
category = "mandatory"
command = {script_cmd("cuda_train.py", "--idle", "--busy-steps", "30", "--sleep", "0.5")}
minutes = 20
""", '[[stop]]\nrule = "gpu_idle"\nbelow_percent = 5\nminutes = 3\n')
    text = path.read_text().replace('gpu = "cpu"', 'gpu = "H200"')
    path.write_text(text.replace("grace_seconds = 1.0", "grace_seconds = 30.0"))
    plan = load_plan(path)
    engine = Engine(plan, poll_interval=0.2)
    probes = Probes(NvmlProbe(), HostProbe({"state": plan.state_dir}))
    session = CampaignSession(plan, engine, probes, poll_interval=0.2,
                              sample_interval=1.0).open()
    try:
        step_to_the_end(session, timeout=600)
        step_until(session, lambda snap: not engine.pending_verifications(), 120,
                   what="the checkpoint's verdict")
    finally:
        session.close()
        probes.close()
    events = read_ledger(plan.state_dir / "ledger.jsonl")
    fired = [e for e in events if e["event"] == "stop_rule_fired"]
    assert [e["rule"] for e in fired] == ["gpu_idle"], fired
    assert "under 5 %" in fired[0]["reason"]
    verified = [e for e in events if e["event"] == "checkpoint_verified"]
    assert verified and all(e["ok"] for e in verified), verified
    assert verified[-1]["step"] > 30  # saved while idle, after the busy steps
    run = engine.state.runs[0]
    assert run.state == "stopped" and run.stop.rule == "gpu_idle"
    stdout = (plan.state_dir / "runs" / run.id / "stdout.log").read_text()
    assert "cuda-draw=" in stdout  # the run saved from CUDA, as the engine asked
