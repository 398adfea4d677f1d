"""CampaignSession: the one wiring of a campaign, driven without any UI.

What the control room shows comes from here, so these tests cover it with a fake
NVML and real processes, or the engine's fake ones where the subject is the session's
words and reads (tests/fakeprocs.py): GPUs joined to runs, probe samples handed to the
engine, refusals as values, the wrap-up to a verified bundle, and the bounded,
restart-safe checkpoint verification.
"""

from __future__ import annotations

import os
import time

import psutil
import pytest

from enginekit import printer_cmd, step_until, write_plan
from fake_pynvml import FakeGpu, FakeNvml
from fakeprocs import SelfPlayingProcesses
from fakewrapup import FakeWrapup
from test_app_support import kill_runs, script_cmd
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger
from tui.probes import HostProbe, NvmlProbe, Probes
from tui.session import CampaignSession

SLOW = ("--steps", "100000", "--sleep", "0.05")


def variant(vid: str, category: str, command: str) -> str:
    return f"""
[[variant]]
id = "{vid}"
category = "{category}"
command = {command}
minutes = 1
"""


def session_for(path, processes=None, **kw) -> CampaignSession:
    """`processes`: the engine's process port (fakeprocs.SelfPlayingProcesses for a test
    whose subject is not the runs' processes), the box's own by default."""
    plan = load_plan(path)
    probes = Probes(NvmlProbe(nvml=FakeNvml([FakeGpu(util=93)])), HostProbe({"state": path.parent}))
    engine = Engine(plan, poll_interval=0.05, sample_interval=0.2, processes=processes)
    return CampaignSession(plan, engine, probes, poll_interval=0.05, sample_interval=0.1, **kw)


def events(path, kind: str) -> list[dict]:
    return [e for e in read_ledger(path.parent / ".itera" / "ledger.jsonl") if e["event"] == kind]


def test_a_session_joins_gpus_to_runs_hands_samples_to_the_engine_and_concludes(tmp_path):
    path = write_plan(tmp_path, variant("control", "mandatory", printer_cmd("--steps", "30")))
    helpers = FakeWrapup()  # the runs and the wrap-up's helpers: nothing of the box's
    with session_for(path, SelfPlayingProcesses(), wrapup_helpers=helpers) as session:
        live = step_until(session, lambda s: s.state.running and s.holders, what="a live run")
        (run,) = live.state.running
        assert dict(live.holders) == {0: (run.id,)}  # the lane the engine gave it
        assert live.probe is not None and live.probe.gpu.devices[0].util_pct == 93
        assert live.conclusion is None  # nothing to conclude while runs go on
        done = step_until(session, lambda s: s.engine.finished, what="the end of the runs")
        assert done.conclusion is not None and "no variant" in done.conclusion.text
        samples = (tmp_path / ".itera/runs" / run.id / "samples.jsonl").read_text().splitlines()
        assert samples  # the engine was handed the session's samples; it sampled nothing itself
        result = session.wrapup(on_line=None)
    assert result.ok is True and result.text.startswith("bundle verified"), result
    assert any("hashed" in line for line in result.lines)
    assert events(path, "wrapup_done")[0]["verified"] is True
    assert helpers.kinds()[:2] == ["draw", "git"]  # the figures, then the code's snapshot


def test_refusals_come_back_as_values_in_the_engine_s_words(tmp_path):
    path = write_plan(tmp_path, variant("control", "mandatory", printer_cmd(*SLOW))
                      + variant("b", "useful", printer_cmd(*SLOW)))
    procs = SelfPlayingProcesses()  # the runs: fake processes, nothing of the box's
    session = session_for(path, procs).open()
    try:
        snap = step_until(session, lambda s: s.state.running, what="a live run")
        refused = session.drop("control")
        assert not refused.ok and "cannot drop 'control': it is mandatory" in refused.message
        assert not session.stop("nope-123", "x").ok
        dropped = session.drop("b")
        assert dropped.ok and dropped.message == "variant b dropped"
        assert session.stop(snap.state.running[0].id, "enough").ok
        assert [e["variant"] for e in events(path, "variant_dropped")] == ["b"]
        assert [sig for sig, _ in procs.run(snap.state.running[0].id).signals] == ["SIGTERM"]
    finally:
        session.close()


def test_the_wrapup_in_a_thread_reports_progress_and_is_waited_for(tmp_path):
    path = write_plan(tmp_path, variant("control", "mandatory", printer_cmd(*SLOW)))
    procs = SelfPlayingProcesses()
    session = session_for(path, procs, wrapup_helpers=FakeWrapup()).open()
    try:
        step_until(session, lambda s: s.state.running, what="a live run")
        assert session.start_wrapup().ok
        assert not session.start_wrapup().ok  # one wrap-up at a time
        result = session.wait_wrapup(90)
        assert result.ok is True, result
        assert result.lines[0].startswith("stopping the runs")
        assert not session.engine.state.running
        assert [sig for sig, _ in procs.runs[0].signals] == ["SIGTERM"]  # stopped, not killed
    finally:
        session.close()


def _verifiers() -> list[psutil.Process]:
    out = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "tui.training.file_check" in " ".join(child.cmdline()):
                out.append(child)
        except psutil.Error:
            continue
    return out


@pytest.mark.slow
def test_checkpoint_verifiers_are_bounded_and_resumed_after_a_restart(tmp_path, monkeypatch):
    # six SDK checkpoints acknowledged in a burst: verified one at a time, never all at once
    monkeypatch.setenv("ITERA_CHECKPOINT_AT", "2,3,4,5,6,7")
    path = write_plan(tmp_path, variant("control", "mandatory", script_cmd(
        "ckpt_printer.py", "--steps", "200", "--sleep", "0.02")))
    session = session_for(path).open()
    most = 0
    try:
        step_until(session, lambda s: len(s.state.runs) and len(s.state.runs[0].checkpoints) >= 6,
                   what="six acknowledgements")
        for _ in range(10):  # the queue is working; stop the engine with work in flight
            session.step()
            most = max(most, len(_verifiers()))
            time.sleep(0.05)
    finally:
        session.close()  # kills and reaps the verifier in flight
    assert most == 1
    assert _verifiers() == []  # nothing leaked past close()
    started = events(path, "checkpoint_verification_started")
    assert started and len(events(path, "checkpoint_verified")) < 6
    with session_for(path) as again:  # the next engine resumes the queue, one at a time
        def all_verified(s):
            nonlocal most
            most = max(most, len(_verifiers()))
            return len(s.state.runs[0].verified) >= 6
        step_until(again, all_verified, timeout=120, what="six verdicts")
    verdicts = events(path, "checkpoint_verified")
    assert most == 1 and all(v["ok"] for v in verdicts)
    assert len({v["path"] for v in verdicts}) == 6
    kill_runs(again.engine)


def test_a_reopened_session_shows_the_ledger_from_memory_and_its_replay_reads_no_run_file(
        tmp_path, monkeypatch):
    """What a face paints first comes from memory: once the session is open, its
    history (a bounded tail) never rereads the ledger, and `replayed()` holds every
    run but opens none of the files the runs wrote, and the conclusion the next step
    brings is judged from the readouts in the ledger, not from the runs' output."""
    import builtins
    import pathlib

    from tui.engine.ledger import journal

    path = write_plan(tmp_path, variant("control", "mandatory", printer_cmd("--steps", "5"))
                      + variant("b", "useful", printer_cmd("--steps", "5")))
    procs = SelfPlayingProcesses()  # the runs: fake processes, nothing of the box's
    with session_for(path, procs) as session:
        step_until(session, lambda s: s.engine.finished, what="the end of the runs")
    monkeypatch.setattr(journal, "RECENT_EVENTS", 8)  # a long campaign: only the tail kept
    with session_for(path, procs) as session:
        ledger = read_ledger(path.parent / ".itera" / "ledger.jsonl")
        runs_dir = str(path.parent / ".itera" / "runs")
        opened = []
        real_open, real_path_open = builtins.open, pathlib.Path.open

        def spy(file, *a, **k):
            opened.append(str(file))
            return real_open(file, *a, **k)

        monkeypatch.setattr(builtins, "open", spy)
        monkeypatch.setattr(pathlib.Path, "open", lambda self, *a, **k: spy(self, *a, **k))
        real_os_open = os.open  # run files are opened with os.open (regular files only)

        def os_spy(file, *a, **k):
            opened.append(str(file))
            return real_os_open(file, *a, **k)

        monkeypatch.setattr(os, "open", os_spy)
        history = session.history(300)
        first = session.replayed()
        assert not [f for f in opened if f.startswith(runs_dir) or "ledger" in f], opened
        assert history == ledger[-8:] and len(history) == 8
        assert {r.target for r in first.state.runs if r.kind == "run"} == {"control", "b"}
        assert first.conclusion is None and first.ending is None
        full = session.step(tick=False, sample=False)
        # the conclusion comes from the ledger too: each ended run's readout is in its
        # run_exited, so judging it reads none of what the run printed
        assert not [f for f in opened if f.startswith(runs_dir) and f.endswith(".log")]
        assert full.state.runs == first.state.runs and full.conclusion is not None
        monkeypatch.setattr(builtins, "open", real_open)
        monkeypatch.setattr(pathlib.Path, "open", real_path_open)
        monkeypatch.setattr(os, "open", real_os_open)
        session.pause(True)  # a new event joins the tail in memory, the oldest leaves
        assert session.history(3)[-1]["event"] == "queue_paused"
        assert len(session.history(300)) == 8
