"""Starting the second box from the first: rsync the folder, check its corpus and
itera-tui there, start its engine for its share only (real sshd, real engines)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import pytest

from boxkit import end_processes_under, far_ledger, far_root, two_box_campaign, wait_until
from sshkit import Sshd, far_env_without_itera, needs_sshd
from sshkit import sshd  # noqa: F401 - a fixture
from tui.campaign import load_plan
from tui.campaign.boxes import box_shares
from tui.engine.decision.answer import CONTINUE
from tui.engine.scheduler import next_intents, phase_of
from tui.engine.ledger.state import CampaignState
from tui.remote.start import far_engine_script, start_box


def ledger_events(path) -> list[dict]:
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def test_each_engine_schedules_only_its_share(tmp_path):
    plan = load_plan(two_box_campaign(tmp_path / "first"))
    here, there = box_shares(plan)
    empty = CampaignState()
    assert [i.target for i in next_intents(plan, empty, here)] == ["control"]
    assert [i.target for i in next_intents(plan, empty, there)] == ["wide"]
    assert {i.target for i in next_intents(plan, empty)} == {"control", "wide"}
    assert phase_of(plan, empty, there) == "runs"


def test_the_far_start_is_detached_and_logged():
    script = far_engine_script("camp dir", "campaign.toml", "b", CONTINUE)
    assert "cd 'camp dir'" in script
    assert ("setsid nohup python3 -m tui.service.daemon supervise --decide continue "
            "campaign.toml >> .itera/engine.log 2>&1 < /dev/null &") in script
    assert "printf '%s\\n' b > .itera/lot" in script  # the share the supervisor's engine runs


@needs_sshd
@pytest.mark.slow
def test_the_second_box_runs_its_share_through_ssh(sshd, tmp_path):
    path = two_box_campaign(tmp_path / "first")
    plan = load_plan(path)
    share = box_shares(plan)[1]
    far = far_root(sshd)
    try:
        started = start_box(plan, share, sshd.settings())
        assert started.ok, started.line
        assert started.line.startswith("box2 (lot b): started in camp: its engine "
                                       "(supervisor pid ")
        assert (far / "campaign.toml").read_bytes() == path.read_bytes()
        assert (far / "deliver.py").is_file()
        assert (far / ".itera" / "lot").read_text() == "b\n"
        ledger = far_ledger(far)
        wait_until(lambda: any(e.get("event") == "wrapup_done" or e.get("event") ==
                               "wrapup_finished" for e in ledger_events(ledger))
                   or not _alive(started.pid), 120, "the second box's engine to end")
        events = ledger_events(ledger)
        launched = [e for e in events if e.get("event") == "run_launched"]
        assert [e["target"] for e in launched] == ["wide"]  # its share only, once
        assert {e["lot"] for e in launched} == {"b"}
        assert not (path.parent / ".itera").exists()  # nothing ran on the first box
        log = (far / ".itera" / "engine.log").read_text()
        assert "wide" in log
        # status there tells that box's share, not the first box's control as queued
        from clikit import cli

        status = json.loads(cli("status", "--json", str(far / "campaign.toml"),
                                cwd=far).stdout)
        assert [r["variant"] for r in status["runs"]] == ["wide"], status["runs"]
        # started again while it runs (or after it ended): nothing launched twice
        again = start_box(plan, share, sshd.settings())
        assert again.ok or "ended at once" in again.line, again.line
        wait_until(lambda: not _alive(again.pid) if again.pid else True, 60, "the rerun")
        relaunched = [e for e in ledger_events(ledger) if e.get("event") == "run_launched"]
        assert len(relaunched) == 1
    finally:
        end_processes_under(far)


@needs_sshd
@pytest.mark.slow
def test_the_far_engine_is_supervised_killed_9_it_restarts_and_adopts_its_run(sshd, tmp_path):
    """The second box's engine runs under the same supervisor as the first box's: killed
    -9 mid-run, it is started again, records why, and adopts the run still going, which
    is never launched twice; the run ends as it would have."""
    import signal

    from bundlekit import deliver_cmd
    from boxkit import processes_under

    wide = deliver_cmd("--label", "wide", "--acc-end", "0.80", "--steps", "300",
                       "--sleep", "0.05")
    path = two_box_campaign(tmp_path / "first", wide=wide)
    plan = load_plan(path)
    share = box_shares(plan)[1]
    far = far_root(sshd)
    ledger = far_ledger(far)

    def events(name):
        return [e for e in ledger_events(ledger) if e.get("event") == name] \
            if ledger.exists() else []

    def far_engines():
        return [p for p in processes_under(far)
                if "tui.service.daemon" in " ".join(p.cmdline()) and "engine" in p.cmdline()]

    try:
        started = start_box(plan, share, sshd.settings())
        assert started.ok, started.line
        wait_until(lambda: events("run_launched"), 60, "the far run's launch")
        (engine,) = wait_until(far_engines, 30, "the far engine")
        assert engine.ppid() == started.pid  # the supervisor's child, not a nohup'd run
        os.kill(engine.pid, signal.SIGKILL)
        restarted = wait_until(lambda: events("engine_restarted"), 60, "the restart")
        assert "SIGKILL" in restarted[0]["reason"]
        (again,) = wait_until(far_engines, 30, "the restarted engine")
        assert again.pid != engine.pid and again.ppid() == started.pid
        wait_until(lambda: events("run_exited"), 120, "the far run's end")
        assert [e["target"] for e in events("run_launched")] == ["wide"]  # adopted, once
        assert events("run_exited")[0]["exit_code"] == 0, events("run_exited")
    finally:
        end_processes_under(far)


@pytest.mark.slow
@needs_sshd
def test_a_changed_corpus_file_on_the_second_box_stops_that_box_named(sshd, tmp_path):
    first = tmp_path / "first"
    first.mkdir()
    (first / "data").mkdir()
    blob = b"the fixed corpus\n" * 100
    (first / "data" / "train.txt").write_bytes(blob)
    digest = hashlib.sha256(blob).hexdigest()
    path = two_box_campaign(first, extra=f"""
        [corpus]
        root = "data"
        files = {{ "train.txt" = "{digest}" }}
    """)
    plan = load_plan(path)
    far = far_root(sshd)
    far.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(first, far)  # an earlier copy, then one byte changed there
    target = far / "data" / "train.txt"
    stat = target.stat()
    target.write_bytes(b"X" + blob[1:])
    os.utime(target, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # rsync's quick check passes
    try:
        result = start_box(plan, box_shares(plan)[1], sshd.settings())
        assert not result.ok
        assert result.line.startswith("box2 (lot b): not started: the check there refused "
                                      "the campaign: corpus.files.\"train.txt\": sha256 "
                                      "mismatch for data/train.txt: the corpus changed"), \
            result.line
        assert not far_ledger(far).exists()
        assert result.pid is None
    finally:
        end_processes_under(far)


@pytest.mark.slow
@needs_sshd
def test_a_box_without_itera_tui_is_refused_in_words(tmp_path):
    bare = Sshd(tmp_path / "bare", far_env=far_env_without_itera(tmp_path), alias="box2")
    try:
        bare.start()
        plan = load_plan(two_box_campaign(tmp_path / "first"))
        result = start_box(plan, box_shares(plan)[1], bare.settings())
        assert not result.ok
        assert "box2 (lot b): not started: package: itera-tui is not installed in " \
            in result.line and "(python 3." in result.line
        assert not (far_root(bare)).exists()  # nothing copied before the refusal
    finally:
        bare.stop()


def _alive(pid) -> bool:
    if not pid:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


def test_an_unknown_lot_is_refused_in_words(tmp_path):
    from clikit import cli

    path = two_box_campaign(tmp_path / "first")
    for command in (["run", "--headless"], ["wrapup"]):
        proc = cli(*command, "--lot", "zz", str(path), cwd=path.parent)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "itera-tui: --lot zz: no such lot in this plan (lots: a, b)" in proc.stderr
        assert "Traceback" not in proc.stderr


def test_a_folder_started_as_lot_b_keeps_running_lot_b_share(tmp_path):
    """The first box writes .itera/lot there: a room or wrap-up opened on that box later
    without --lot drives lot b's share, never this box's."""
    from tui.engine import Engine, EngineError

    path = two_box_campaign(tmp_path / "second")
    (path.parent / ".itera").mkdir()
    (path.parent / ".itera" / "lot").write_text("b\n")
    plan = load_plan(path)
    assert Engine(plan).share.lots == ("b",) and not Engine(plan).share.runs_steps
    assert Engine(plan, lot="b").share.variants == ("wide",)
    with pytest.raises(EngineError, match="--lot a: this folder runs lot b's share"):
        Engine(plan, lot="a")
