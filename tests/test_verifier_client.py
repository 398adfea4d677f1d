"""One verifier process for many files: the real `--serve` verifier and a misbehaving one.

The client must never block its caller (submit and poll return at once), must
answer every path exactly once (timed out, died twice, or verified), restart a
dead verifier once per file, and leave no process behind.
"""

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
import torch

from tui import training
from enginekit import wait_for
from tui.engine.checkpoints.verifier import VerifierClient

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

FLAKY = [sys.executable, str(Path(__file__).parent / "scripts" / "flaky_verifier.py")]


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("files")
    run = training.attach(env={"ITERA_RUN_DIR": str(root), "ITERA_METRICS": str(root / "m.jsonl")},
                          checkpoint_on_sigterm=False)
    sdk = run.save_checkpoint(model=torch.nn.Linear(3, 3), step=7).path
    plain = root / "plain.pth"
    torch.save(torch.nn.Linear(2, 2).state_dict(), plain)
    junk = root / "junk.pt"
    junk.write_bytes(b"not a torch file at all" * 10)
    return {"sdk": sdk, "plain": plain, "junk": junk, "missing": root / "nope.pt"}


def test_many_files_one_process_answers_each_once(files):
    with VerifierClient() as client:
        ids = {client.submit(p): name for name, p in files.items()}
        verdicts = client.wait(timeout=120)
        assert client.started == 1 and client.pending == 0
        pid = client.pid
    assert gone(pid)
    by = {ids[v.id]: v for v in verdicts}
    assert sorted(by) == sorted(files) and len(verdicts) == len(files)
    assert by["sdk"].ok and by["sdk"].format == "itera" and by["sdk"].step == 7
    assert by["plain"].ok and by["plain"].kind == "state_dict" and by["plain"].sha256
    assert not by["junk"].ok and "not a loadable torch file" in by["junk"].problem
    assert by["missing"].problem == "no such file"


def test_submit_and_poll_never_block(files, tmp_path):
    # a verifier that never gets ready: a submit or poll that waited on it would never
    # return, so the calls run in a thread the test gives a deadline (not a timing bound)
    silent = [sys.executable, "-c", "import time; time.sleep(3600)"]
    with VerifierClient(command=silent, start_timeout_s=3600) as client:
        answers = []
        calls = threading.Thread(target=lambda: answers.append(
            (client.submit(tmp_path / "x.pt"), client.poll(), client.poll())), daemon=True)
        calls.start()
        calls.join(timeout=30)
        assert not calls.is_alive(), "submit or poll waited for the verifier"
        assert answers[0][1:] == ([], [])  # nothing answered yet, and said so at once
    with VerifierClient() as client:
        rid = client.submit(files["sdk"])
        got = []
        wait_for(lambda: got.extend(client.poll()) or got, timeout=60, what="the verdict")
        assert [v.id for v in got] == [rid] and got[0].ok


def test_a_hanging_verifier_is_killed_and_the_rest_still_answered(tmp_path):
    with VerifierClient(command=FLAKY, timeout_s=1.0) as client:
        hang = client.submit(tmp_path / "hang.pt")
        wait_for(lambda: client.pid is not None, what="the first verifier")
        first_pid = client.pid
        ok = client.submit(tmp_path / "fine.pt")
        verdicts = {v.id: v for v in client.wait(timeout=30)}
        assert verdicts[hang].problem == ("verification timed out after 1 s (the verifier "
                                          "was killed)")
        assert verdicts[ok].ok and client.started == 2
        assert gone(first_pid)


def test_a_verifier_that_never_gets_ready_is_killed(tmp_path):
    silent = [sys.executable, "-c", "import time; time.sleep(3600)"]
    with VerifierClient(command=silent, start_timeout_s=1.0) as client:
        rid = client.submit(tmp_path / "x.pt")
        wait_for(lambda: client.pid is not None, what="the verifier")
        pid = client.pid
        [verdict] = client.wait(timeout=30)
        assert verdict.id == rid and verdict.problem == (
            "the verifier did not start within 1 s (it was killed)")
        assert gone(pid)


def test_a_dying_verifier_is_restarted_once_per_file(tmp_path):
    with VerifierClient(command=FLAKY) as client:
        once = client.submit(tmp_path / "die-once.pt")
        always = client.submit(tmp_path / "die-always.pt")
        after = client.submit(tmp_path / "fine.pt")
        noisy = client.submit(tmp_path / "noise.pt")  # a stray line before its verdict
        verdicts = {v.id: v for v in client.wait(timeout=30)}
    assert len(verdicts) == 4 and verdicts[noisy].ok
    assert verdicts[once].ok and verdicts[once].attempts == 2
    assert not verdicts[always].ok and verdicts[always].attempts == 2
    assert verdicts[always].problem.startswith("the verifier died while checking it "
                                               "(2 attempts; exit status 9)")
    assert verdicts[after].ok and verdicts[after].attempts == 1
    assert verdicts[once].step is None  # "12" is not an integer: dropped, never passed on


def test_a_real_verifier_killed_between_files_is_replaced(files):
    with VerifierClient() as client:
        assert client.verify(files["plain"]).ok
        victim = client.pid
        os.kill(victim, 9)
        verdict = client.verify(files["sdk"])
        assert verdict.ok and client.started == 2 and client.pid != victim


def test_close_reaps_a_busy_verifier_and_cancels_what_is_left(tmp_path):
    client = VerifierClient(command=FLAKY)
    client.submit(tmp_path / "hang.pt")
    client.submit(tmp_path / "fine.pt")
    wait_for(lambda: client.pid is not None, what="the verifier")
    pid = client.pid
    client.close()
    assert gone(pid)
    assert {v.problem for v in client.poll()} == {
        "verification cancelled: the verifier was closed"}
    with pytest.raises(RuntimeError):
        client.submit(tmp_path / "x.pt")


def test_stop_if_idle_frees_the_process_and_the_client_goes_on(files):
    with VerifierClient() as client:
        assert client.verify(files["plain"]).ok
        pid = client.pid
        assert client.stop_if_idle() and gone(pid) and client.pid is None
        assert client.verify(files["sdk"]).ok and client.started == 2


def test_the_serve_protocol_is_one_json_verdict_per_line(files, tmp_path):
    requests = "".join(json.dumps({"id": i, "path": str(p)}) + "\n"
                       for i, p in enumerate(files.values()))
    requests += "garbage\n" + json.dumps({"id": 99}) + "\n"
    env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    done = subprocess.run([sys.executable, "-m", "tui.training.file_check", "--serve"],
                          input=requests, capture_output=True, text=True, env=env, timeout=120)
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0 and "Traceback" not in done.stderr
    assert lines[0]["ready"] is True
    assert [v["id"] for v in lines[1:]] == [0, 1, 2, 3, None, None]
    assert lines[5]["problem"] == "request is not JSON"
    assert lines[6]["problem"] == "request lacks a 'path' string"
