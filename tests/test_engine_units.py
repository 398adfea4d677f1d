"""Ledger, metrics feed and replay: the pieces the engine's memory is made of."""

import json

from tui.engine.reading.feeds import JsonlFeed, StdoutFeed
from tui.engine.ledger.file import Ledger, read_ledger
from tui.engine.ledger.state import replay
from tui.engine.ledger.events import CampaignStarted, CheckpointRequested, QueuePaused, QueueResumed, RunExited, RunLaunched, RunStopRequested, StopRuleFired


def test_ledger_appends_fsynced_lines_and_tolerates_a_torn_tail(tmp_path):
    path = tmp_path / "ledger.jsonl"
    ledger = Ledger(path, clock=lambda: 100.0)
    ledger.append(CampaignStarted(plan_sha256="x"))
    ledger.append(QueuePaused())
    with open(path, "ab") as f:  # a crash in the middle of a write
        f.write(b'{"seq": 3, "t": 1, "event": "queue_resu')
    assert [e["event"] for e in read_ledger(path)] == ["campaign_started", "queue_paused"]
    again = Ledger(path, clock=lambda: 101.0)  # restart repairs the tail
    again.append(QueueResumed())
    events = read_ledger(path)
    assert [e["event"] for e in events] == ["campaign_started", "queue_paused", "queue_resumed"]
    assert [e["seq"] for e in events] == [1, 2, 3]
    assert replay(events).paused is False


def test_jsonl_feed_waits_for_torn_lines_and_counts_bad_ones(tmp_path):
    path = tmp_path / "metrics.jsonl"
    feed = JsonlFeed(path)
    assert feed.poll() == []  # the file does not exist yet
    with open(path, "w") as f:
        f.write('{"step": 1, "loss": 2.0}\nnot json\n{"step": 2, "lo')
    assert [r["step"] for r in feed.poll()] == [1]
    assert feed.bad_lines == 1
    with open(path, "a") as f:
        f.write('ss": NaN}\n')
    (record,) = feed.poll()
    assert record["step"] == 2 and record["loss"] != record["loss"]
    assert feed.poll() == []


def test_stdout_feed_reads_every_spelling_of_non_finite(tmp_path):
    path = tmp_path / "stdout.log"
    path.write_text("epoch 1\nloss nan\nloss: inf\nloss=NaN\nloss = 0.25\n")
    feed = StdoutFeed(path, (("loss", r"loss\s*[:=]?\s*(\S+)"),))
    values = [r["loss"] for r in feed.poll()]
    assert len(values) == 4
    assert [str(v) for v in values[:3]] == ["nan", "inf", "nan"] and values[3] == 0.25


def test_replay_keeps_stop_reason_and_exit(tmp_path):
    ledger = Ledger(tmp_path / "l.jsonl", clock=lambda: 5.0)
    ledger.append(RunLaunched(run="v-abc-1", target="v", kind="run",
                  category="useful", attempt=1, config_hash="abc", pid=1, pid_start=1.0))
    ledger.append(StopRuleFired(run="v-abc-1", rule="non_finite", reason="loss=nan",
                  value="nan", step=40))
    ledger.append(RunStopRequested(run="v-abc-1", by="rule", reason="x", deadline=35.0))
    ledger.append(RunExited(run="v-abc-1", exit_code=-15))
    run = replay(read_ledger(tmp_path / "l.jsonl")).run("v-abc-1")
    assert run.state == "stopped"
    assert run.stop.to_dict() == {"rule": "non_finite", "reason": "loss=nan", "value": "nan",
                        "step": 40, "t": 5.0}
    assert run.exit_code == -15
    assert json.dumps(run.to_dict())


def test_engine_writes_a_probe_sample_into_each_live_run(tmp_path):
    """Raw measurements: a GPU + host sample every sample_interval, headless too."""
    import sys
    import time

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from enginekit import printer_cmd, write_plan
    from fake_pynvml import FakeNvml  # stand-in: no NVIDIA driver here
    from tui.campaign import load_plan
    from tui.engine import Engine
    from tui.probes import HostProbe, NvmlProbe, Probes

    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "60", "--sleep", "0.02")}
    minutes = 1
    """)
    from tui.session import CampaignSession

    probes = Probes(NvmlProbe(nvml=FakeNvml()), HostProbe({"state": tmp_path}))
    plan = load_plan(path)
    from fakeprocs import SelfPlayingProcesses

    engine = Engine(plan, sample_interval=0.2, processes=SelfPlayingProcesses())  # no process
    deadline = time.monotonic() + 60
    with CampaignSession(plan, engine, probes, sample_interval=0.05) as session:
        while not session.step().engine.finished:
            assert time.monotonic() < deadline, "the campaign did not finish in time"
            time.sleep(0.05)
    (run,) = engine.state.runs
    lines = (tmp_path / ".itera/runs" / run.id / "samples.jsonl").read_text().splitlines()
    assert len(lines) >= 3
    sample = json.loads(lines[0])
    assert sample["gpu"]["driver"] == "ok" and sample["gpu"]["devices"]
    assert sample["host"]["ram_total_bytes"] > 0


def test_ledger_numbering_cannot_be_overridden_by_event_fields(tmp_path):
    import pytest

    ledger = Ledger(tmp_path / "l.jsonl", clock=lambda: 1.0)
    # an event's own seq and t are the ledger's to give: whatever it was built with
    ledger.append(CheckpointRequested(run="r", request_seq=7, by="user", seq=99, t=5.0))
    (ev,) = read_ledger(tmp_path / "l.jsonl")
    assert ev.seq == 1 and ev.t == 1.0 and ev.request_seq == 7
