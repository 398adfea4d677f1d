"""What must hold when things go wrong: restarts, expired lots, failed checks, typos.

Each test is a way a campaign could silently waste paid GPU time or hang.
"""

import json
import sys
import time

import pytest

from clikit import cli
from enginekit import drive, printer_cmd, wait_for, write_plan
from fakeprocs import FakeClock, FakeProcesses, drive_fake, drive_plan, fake_host
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger


NAN_AT_3 = f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--jsonl", "--steps", "20", "--nan-at", "3", "--sleep", "0.01")}
minutes = 1
"""


def ledger(tmp_path):
    return read_ledger(tmp_path / ".itera/ledger.jsonl")


def test_a_rule_matched_while_the_control_room_was_down_still_stops_the_run(tmp_path):
    path = write_plan(tmp_path, NAN_AT_3, '[[stop]]\nrule = "non_finite"\n')
    clock = FakeClock()
    procs = FakeProcesses(clock)
    engine = Engine(load_plan(path), clock=clock.wall, monotonic=clock.mono,
                    processes=procs).open()
    engine.tick()  # launch, then the control room goes away before any record
    rid = engine.state.running[0].id
    engine.close()
    fake = procs.run(rid)
    while fake.alive:  # it writes its NaN and its last record while nobody watches
        clock.advance(0.05)
        fake.play()
    engine = Engine(load_plan(path), clock=clock.wall, monotonic=clock.mono,
                    processes=procs).open()
    run = drive_fake(engine, procs, clock).state.run(rid)
    engine.close()
    assert run.state == "stopped"  # not accepted as completed
    assert run.stop.rule == "non_finite" and run.stop.step == 3


@pytest.mark.slow  # real engines, runs or `itera-tui` processes
def test_a_verification_in_flight_at_restart_is_started_again(tmp_path):
    script = tmp_path / "ack.py"
    script.write_text(
        "import json, os, time\n"
        "d = os.environ['ITERA_RUN_DIR']\n"
        "os.makedirs(os.path.join(d, 'checkpoints'), exist_ok=True)\n"
        "open(os.path.join(d, 'checkpoints', 'step-1.pt'), 'wb').write(b'not torch')\n"
        "with open(os.environ['ITERA_METRICS'], 'a') as f:\n"
        "    f.write(json.dumps({'t': time.time(), 'step': 1, 'event': 'checkpoint',\n"
        "        'path': 'checkpoints/step-1.pt', 'sha256': 'ab', 'bytes': 9}) + '\\n')\n"
        "time.sleep(1.0)\n")
    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {json.dumps([sys.executable, str(script)])}
    minutes = 1
    """)
    engine = Engine(load_plan(path)).open()
    engine.tick()
    rid = engine.state.running[0].id
    wait_for(lambda: (tmp_path / ".itera/runs" / rid / "metrics.jsonl").exists(), what="ack")
    time.sleep(0.2)
    engine.tick()  # acknowledges and starts a verifier...
    assert engine.state.run(rid).checkpoints and not engine.state.run(rid).verified
    engine.close()  # ...which the next engine never hears from
    run = drive(path).state.run(rid)
    e = Engine(load_plan(path)).open()  # drive ends when the run exits: one more engine
    try:
        deadline = time.time() + 90  # the verifier's torch import, on a busy box
        while not e.state.run(rid).verified and time.time() < deadline:
            e.tick()
            time.sleep(0.1)
        run = e.state.run(rid)
    finally:
        e.close()
    assert run.verified and run.verified[0].ok is False  # b"not torch" is caught


def test_headless_skips_what_no_rented_lot_can_still_hold_instead_of_hanging(tmp_path):
    path = write_plan(tmp_path, NAN_AT_3,
                      '[window]\nstart = 2020-01-01T00:00:00Z\n')
    proc = cli("run", "--headless", "--no-wrapup", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "skipped control (run): no lot with 1 GPU(s) has window left" in proc.stdout
    assert not [e for e in ledger(tmp_path) if e["event"] == "run_launched"]


def test_headless_resumes_a_queue_paused_in_the_control_room(tmp_path, monkeypatch):
    fake_host(monkeypatch)  # headless in the test's process, its runs on fake processes
    path = write_plan(tmp_path, NAN_AT_3)
    engine = Engine(load_plan(path)).open()
    engine.set_paused(True)
    engine.close()
    proc = cli("run", "--headless", "--no-wrapup", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "resuming it" in proc.stdout
    assert [e for e in ledger(tmp_path) if e["event"] == "run_launched"]


def test_post_steps_wait_for_each_other(tmp_path):
    steps = "".join(f"""
    [[step]]
    id = "{sid}"
    kind = "wrapup"
    minutes = 1
    command = {printer_cmd("--steps", "15", "--sleep", "0.02")}
    {after}
    """ for sid, after in (("export", ""), ("report", 'after = ["export"]')))
    path = write_plan(tmp_path, NAN_AT_3.replace('"--nan-at", "3", ', "") + steps, gpus=2)
    drive_plan(path)
    events = ledger(tmp_path)
    launched = {e["target"]: e["seq"] for e in events if e["event"] == "run_launched"}
    exited = {e["run"].split("-")[0]: e["seq"] for e in events if e["event"] == "run_exited"}
    assert exited["export"] < launched["report"]


def test_a_decide_typo_is_refused_before_any_gpu_hour(tmp_path):
    path = write_plan(tmp_path, NAN_AT_3, pilot='[pilot]\nsteps = 3\n')
    for bad, message in (("drop:nope", "no variant 'nope'"),
                         ("drop:control", "it is mandatory"),
                         ("drop:", "needs at least one variant"),
                         ("go", "unknown decision 'go'")):
        proc = cli("run", "--headless", "--decide", bad, str(path), cwd=tmp_path)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / ".itera/ledger.jsonl").exists()  # nothing started at all


def test_decide_without_a_pilot_is_a_no_op_said_in_one_line(tmp_path, monkeypatch):
    """Scripts pass one set of flags to every campaign (issue 34, item 9): without a
    [pilot] there is no decision point, so `--decide continue` changes nothing."""
    fake_host(monkeypatch)  # headless in the test's process, its runs on fake processes
    path = write_plan(tmp_path, NAN_AT_3)
    proc = cli("run", "--headless", "--no-wrapup", "--decide", "continue", str(path),
               cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    said = [line for line in proc.stdout.splitlines() if "--decide" in line]
    assert said == ["--decide continue: this plan has no [pilot], so no decision point; "
                    "the flag changes nothing"], proc.stdout
    events = [e["event"] for e in ledger(tmp_path)]
    assert "run_launched" in events and not [e for e in events if "decision" in e]
    typo = cli("run", "--headless", "--decide", "go", str(path), cwd=tmp_path)
    assert typo.returncode == 2 and "unknown decision 'go'" in typo.stderr


def test_headless_at_an_unanswered_decision_exits_3(tmp_path, monkeypatch):
    procs = fake_host(monkeypatch)  # headless in the test's process, on fake processes
    path = write_plan(tmp_path, NAN_AT_3.replace('"--nan-at", "3", ', ""),
                      pilot='[pilot]\nsteps = 3\ndecide = "ask"\n')
    proc = cli("run", "--headless", str(path), cwd=tmp_path)
    assert proc.returncode == 3 and "decision point reached" in proc.stdout, proc.stdout
    assert [run.alive for run in procs.runs] == [False]  # the pilot only, ended


def test_a_failed_data_check_blocks_the_pilot_and_the_runs(tmp_path, monkeypatch):
    def the_check(run):  # what `python -c "sys.exit('sha256 mismatch')"` does
        if run.argv[-1].endswith("sys.exit('sha256 mismatch')"):
            run._append(run.run_dir / "stderr.log", "sha256 mismatch\n")
            run.exit(1)
    procs = fake_host(monkeypatch, the_check)  # headless in this process, on fakes
    steps = f"""
    [[step]]
    id = "data_check"
    kind = "data_check"
    minutes = 1
    gpus = 0
    command = {json.dumps([sys.executable, "-c", "import sys; sys.exit('sha256 mismatch')"])}
    """
    path = write_plan(tmp_path, NAN_AT_3 + steps, pilot='[pilot]\nsteps = 3\n')
    proc = cli("run", "--headless", "--no-wrapup", "--decide", "continue", str(path),
               cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert len(procs.runs) == 1  # the check alone was launched
    assert "campaign blocked: data_check failed" in proc.stdout
    kinds = [e["kind"] for e in ledger(tmp_path) if e["event"] == "run_launched"]
    assert kinds == ["step"]
    status = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
    assert "blocked: data_check failed" in status["conclusion"]["text"]
    causes = [r["cause"] for r in status["budget"]["rejections"]]
    assert any(c.startswith("data_check failed before the pilot") for c in causes)
    assert {r["state"] for r in status["runs"] if r["kind"] == "run"} == {"dropped"}


def test_reserved_ids_and_shared_devices_are_refused_at_check(tmp_path):
    path = write_plan(tmp_path, NAN_AT_3.replace('id = "control"', 'id = "wrapup"'))
    proc = cli("check", str(path))
    assert proc.returncode == 2 and '"wrapup" is reserved' in proc.stderr
    text = (NAN_AT_3 + '\n[[lot]]\nid = "b"\ngpu = "cpu"\nhours = 1\nprice_usd = 1.0\n'
            'devices = [0]\n')
    proc = cli("check", str(write_plan(tmp_path, text)))
    assert proc.returncode == 2 and "CUDA device 0 is already lot" in proc.stderr
