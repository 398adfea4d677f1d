"""Notices from a campaign, with no room open: Apprise posts to a real HTTP
server on 127.0.0.1 started by the test (`json://` URLs, a thread of the test).

A demo-like campaign (a control, a useful and an exploratory variant that goes
NaN in its pilot; a decision point with a 3 s deadline and `drop-stopped`)
runs headless: the exploratory stop, the decision point, the deadline's
decision and the wrap-up (verdict, cost, fetch command) arrive in that order.
A receiver that is down, slow (10 s per request) or answering 500 changes
nothing but the delivery warnings, each lost notice named once; a token in the
URL is in no file under .itera/ or the bundle and on no output.

One campaign runs for real, headless, to its wrap-up (the notices in order, the token
nowhere); the others run a `CampaignSession` on the engine's fake processes and clocks
(tests/fakeprocs.py): what the person is told does not need a process started.
"""

import os
import re
from pathlib import Path

import pytest

from clikit import cli
from conftest import run_cli
from enginekit import printer_cmd, wait_for, write_plan
from fakeprocs import FakeClock, FakeProcesses, drive_session
from notifykit import Receiver, down_url
from tui.engine import read_ledger

TOKEN = "s3cretTOKEN42"
ALL_KINDS = '["stop", "failed", "decision", "deadline", "checkpoint", "gpu", "window", ' \
            '"restart", "wrapup", "wrapup_failed"]'


def demo_like(root: Path, url: str | None, steps: str = "15", attempts: int = 3) -> Path:
    variants = "".join(f"""
    [[variant]]
    id = "{vid}"
    category = "{cat}"
    command = {printer_cmd("--steps", steps, "--sleep", "0.02", *extra)}
    minutes = 1
    """ for vid, cat, extra in (("control", "mandatory", ()), ("wide", "useful", ()),
                                ("hot", "exploratory", ("--nan-at", "2", "--sleep", "0.5"))))
    pilot = """
    [pilot]
    steps = 3
    decide = "ask"
    decide_after_minutes = 0.05
    default = "drop-stopped"
    """
    extra = '\n[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n'
    if url is not None:
        extra += f'\n[notify]\nurls = ["{url}"]\non = {ALL_KINDS}\nattempts = {attempts}\n'
    path = write_plan(root, variants, extra, pilot=pilot)
    path.write_text(path.read_text().replace("hours = 1\n", "hours = 4\n"))  # no window notice
    return path


@pytest.fixture
def receiver():
    made = []

    def make(mode="ok", delay=10.0):
        made.append(Receiver(mode, delay))
        return made[-1]
    yield make
    for r in made:
        r.close()


def files_holding(root: Path, needle: str) -> list[str]:
    hits = []
    for base in (root / ".itera", root / "outputs"):
        for p in base.rglob("*"):
            if p.is_file() and needle.encode() in p.read_bytes():
                hits.append(str(p.relative_to(root)))
    return hits


def lost_warnings(ledger) -> list[str]:
    return [e["message"] for e in ledger if e["event"] == "warning"
            and e["message"].startswith("notice not delivered: ")]


def shape(ledger) -> list[tuple]:
    """The campaign as it went: what happened to which run, without times or pids
    (and without the notices' own delivery warnings)."""
    keep = ("run_launched", "run_exited", "stop_rule_fired", "run_stop_requested",
            "decision_pending", "decision_taken", "variant_dropped", "wrapup_started",
            "wrapup_done", "warning", "campaign_started", "window_started")
    out = []
    for e in ledger:
        if e["event"] not in keep or (
                e["event"] == "warning" and e["message"].startswith("notice not delivered")):
            continue
        out.append((e["event"], e.get("run"), e.get("rule"), e.get("exit_code"),
                    e.get("decision"), tuple(e.get("drop") or ()), e.get("by"),
                    e.get("verified"), e.get("default")))
    return out


def latencies(ledger) -> dict:
    """Seconds from the NaN record to its stop, and from the deadline to the decision."""
    (stop,) = [e for e in ledger if e["event"] == "stop_rule_fired"]
    (pending,) = [e for e in ledger if e["event"] == "decision_pending"]
    (taken,) = [e for e in ledger if e["event"] == "decision_taken"]
    return {"stop_s": stop["t"] - stop["record_t"], "deadline_s": taken["t"] - pending["deadline"]}


def commit_without_the_token(root: Path, path: Path) -> None:
    """The campaign folder in git, the token added since the last commit (as a person
    would): the bundle's `code/git.diff` then quotes campaign.toml's new lines."""
    import subprocess

    text = path.read_text()
    path.write_text(text.replace(TOKEN, "placeholder"))
    git = ["git", "-c", "user.email=t@example.org", "-c", "user.name=t"]
    for args in (["init", "-q"], ["add", "campaign.toml"], ["commit", "-qm", "c"]):
        subprocess.run(git + args, cwd=root, check=True, capture_output=True)
    path.write_text(text)


def run_demo(root: Path, url: str | None, in_git: bool = False):
    root.mkdir(parents=True, exist_ok=True)
    path = demo_like(root, url)
    if in_git:
        commit_without_the_token(root, path)
    proc = run_cli("run", "--headless", str(path), cwd=root, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return path, proc, read_ledger(root / ".itera" / "ledger.jsonl")


def fake_demo(root: Path, url: str | None, each=None):
    """The demo-like campaign on fake processes and clocks, to the engine's end (the
    wrap-up, which starts git and the plot drawer, is the real campaign's): its ledger."""
    root.mkdir(parents=True, exist_ok=True)
    clock = FakeClock()
    drive_session(demo_like(root, url, attempts=2), lambda snap: snap.engine.finished, clock,
                  FakeProcesses(clock), timeout=120.0)
    return read_ledger(root / ".itera" / "ledger.jsonl")


@pytest.fixture(scope="module")
def without_notify(tmp_path_factory):
    return fake_demo(tmp_path_factory.mktemp("plain"), None)


@pytest.mark.slow
def test_the_campaign_tells_the_person_in_order_with_no_room_open(tmp_path, receiver):
    rx = receiver()
    path, proc, ledger = run_demo(tmp_path, rx.url(), in_git=True)
    notices = rx.notices()
    titles = [n["title"] for n in notices]
    assert [re.sub(r"-[0-9a-f]{8}-\d+", "", t) for t in titles] == [
        "t: stop rule non_finite stopped hot",
        "t: the pilot is done: decide",
        "t: decision by the deadline: drop hot, then continue",
        "t: the bundle is verified"], titles
    stop, decision, deadline, wrapup = (n["message"] for n in notices)
    assert "loss=nan at step 2" in stop
    assert "Pilot: control completed (acc" in decision and "hot STOPPED (non_finite" in decision
    assert "the engine takes: drop hot, then continue" in decision
    assert "(in 3 s)" in decision or "(in 2 s)" in decision
    assert "no answer within 0.05 min" in deadline
    assert "verdict: answered" in wrapup and "USD per accepted deliverable" in wrapup
    assert "bundle: outputs/bundle (" in wrapup
    assert "fetch it: rsync -avP <user>@<box>:<campaign-dir>/outputs/bundle/ ./t-bundle" \
        in wrapup
    assert "GPUs idle waiting for a decision: " in wrapup
    assert all(n["path"] == "/hook/s3cretTOKEN42" for n in notices)  # the address as given
    assert not lost_warnings(ledger)
    # the deadline, in the ledger and the report
    (taken,) = [e for e in ledger if e["event"] == "decision_taken"]
    assert taken["by"] == "deadline" and taken["drop"] == ["hot"]
    report = (tmp_path / "outputs/bundle/report.md").read_text()
    assert re.search(r"- GPUs idle waiting for a decision: \d+ s \(0\.\d % of the window\); "
                     r"the calendar planned 0 s for the decision\.", report), report
    assert "GPUs idle waiting for a decision:" in proc.stdout  # the ending's lines
    # the token: in the user's campaign.toml only
    assert files_holding(tmp_path, TOKEN) == []
    assert "json://127.0.0.1:" in (tmp_path / ".itera/plan.toml").read_text()  # redacted form
    diff = (tmp_path / "outputs/bundle/code/git.diff").read_text()
    assert '+urls = ["***"]' in diff  # the diff quotes the new line, its address hidden
    assert TOKEN not in proc.stdout + proc.stderr
    for command in (("status",), ("status", "--json"), ("check",), ("check", "--json")):
        out = run_cli(*command, str(path), cwd=tmp_path)
        assert out.returncode == 0 and TOKEN not in out.stdout + out.stderr, command


@pytest.mark.parametrize("mode", ["down", "slow", "500"])
def test_a_receiver_down_slow_or_failing_changes_nothing_but_the_warnings(
        tmp_path, receiver, without_notify, mode, monkeypatch):
    import threading

    import apprise

    # two attempts (one backoff, of 0.1 s) and, for the slow one, a 0.5 s read timeout
    # (Apprise's `rto`): each lost notice is still retried and timed out, in a second or two
    from tui.notify import sender

    monkeypatch.setattr(sender, "BACKOFF_S", 0.1)
    url = down_url() if mode == "down" else receiver(mode, delay=10.0).url()
    if mode == "slow":
        url += "?rto=0.5"

    posted_from, post = [], apprise.Apprise.notify

    def notify(self, *args, **kwargs):  # which thread waits on each delivery
        posted_from.append(threading.current_thread())
        return post(self, *args, **kwargs)
    monkeypatch.setattr(apprise.Apprise, "notify", notify)
    root = tmp_path / "c"
    root.mkdir()
    clock = FakeClock()
    drive_session(demo_like(root, url, attempts=2), lambda snap: snap.engine.finished, clock,
                  FakeProcesses(clock), timeout=120.0)
    ledger = read_ledger(root / ".itera" / "ledger.jsonl")
    assert shape(ledger) == shape(without_notify)
    # the loop never waited on a delivery: each ran on the notices' own thread, and the
    # stop and the deadline came as without notices
    assert posted_from and threading.current_thread() not in posted_from
    assert {t.name for t in posted_from} == {"itera-notices"}
    assert latencies(ledger) == latencies(without_notify)
    lost = lost_warnings(ledger)
    names = [re.match(r'notice not delivered: (\w+) "', m).group(1) for m in lost]
    assert sorted(names) == sorted(["stop", "decision", "deadline"]), lost
    for message in lost:
        assert "json://127.0.0.1:" in message and "/***" in message
        assert message.endswith("(2 attempts)"), message  # retried once, then given up
    assert files_holding(root, TOKEN) == []


def test_a_nan_flood_is_one_notice(tmp_path, receiver):
    rx = receiver()
    variants = f"""
    [[variant]]
    id = "flood"
    category = "mandatory"
    command = {printer_cmd("--steps", "1000000", "--nan-at", "1", "--sleep", "0.001",
                           "--ignore-sigterm")}
    minutes = 1
    """
    extra = (f'\n[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n'
             f'\n[notify]\nurls = ["{rx.url()}"]\non = {ALL_KINDS}\n')
    path = write_plan(tmp_path, variants, extra)
    path.write_text(path.read_text().replace("hours = 1\n", "hours = 4\n"))
    # it ignores the SIGTERM: NaN after NaN until the SIGKILL one grace later
    clock = FakeClock()
    procs = FakeProcesses(clock)
    drive_session(path, lambda snap: snap.engine.finished, clock, procs)
    (run,) = procs.runs
    stdout = (run.run_dir / "stdout.log").read_text()
    assert stdout.count("loss: nan") > 10  # it did flood before it was stopped
    assert [sig for sig, _ in run.signals] == ["SIGTERM", "SIGKILL"]
    titles = rx.titles()
    assert len(titles) == 1 and "stop rule non_finite stopped flood" in titles[0], titles


def test_a_restart_after_a_crash_is_told(tmp_path, receiver):
    rx = receiver()
    path = demo_like(tmp_path, rx.url(), steps="40")
    clock = FakeClock()
    procs = FakeProcesses(clock)
    drive_session(path, lambda snap: snap.engine.state.running, clock, procs, crash=True)
    assert rx.titles() == []  # the first start is not a restart
    drive_session(path, lambda snap: snap.engine.finished, clock, procs, timeout=120.0)
    titles = rx.titles()
    assert "t: the engine restarted after a crash" in titles, titles
    assert titles.count("t: the engine restarted after a crash") == 1
    (restart,) = [n for n in rx.notices() if n["title"] == "t: the engine restarted after a crash"]
    assert "reattached to 1 live run(s)" in restart["message"]


def test_the_window_ending_with_work_left_is_told_once(tmp_path, receiver):
    rx = receiver()
    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "60", "--sleep", "0.05")}
    minutes = 1
    """
    path = write_plan(tmp_path, variants, f'\n[notify]\nurls = ["{rx.url()}"]\n'
                      'window_lead_minutes = 90\n')
    # a 1 h lot whose 2 h wrap-up reserve runs past it: inside the (scaled) lead at once
    path.write_text(path.read_text().replace('metric = "acc"\n',
                                             'metric = "acc"\nwrapup_hours = 2\n'))
    clock = FakeClock()
    drive_session(path, lambda snap: snap.engine.finished, clock, FakeProcesses(clock))
    titles = rx.titles()  # the session's close sent what it had
    assert len(titles) == 1 and titles[0].startswith("t: the rental window ends in "), titles
    assert "Work is left" in rx.notices()[0]["message"]


def test_notify_test_says_per_address_delivered_or_why_not(tmp_path, receiver):
    good, bad = receiver(), receiver("500")
    secrets = tmp_path.parent / f"{tmp_path.name}-urls"
    secrets.write_text(f"{bad.url('bad/' + TOKEN)}\n")
    campaign = tmp_path / "c"
    campaign.mkdir()
    path = write_plan(campaign, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd()}
    minutes = 1
    """, f'\n[notify]\nurls = ["{good.url()}"]\nurls_file = "{secrets}"\n')
    proc = cli("notify", "--test", str(path), cwd=campaign)
    lines = proc.stdout.splitlines()
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert lines == [f"json://127.0.0.1:{good.port}/***: delivered",
                     f"json://127.0.0.1:{bad.port}/***: NOT delivered: Failed to send JSON "
                     "POST notification: Internal server error., error=500."], lines
    assert TOKEN not in proc.stdout + proc.stderr
    assert [n["title"] for n in good.notices()] == ["t: test notice from itera-tui"]
    assert not (campaign / ".itera").exists()  # a test sends; it starts no campaign
    os.unlink(secrets)


def test_a_lost_gpu_under_a_live_run_and_a_failed_run_are_told(tmp_path, receiver):
    """The watchdog's warning (from a probe sample: this machine has no NVIDIA driver,
    so the sample is built, as tests/test_engine_watchdog.py does) and a run that exits 3
    reach the person through the session's notices."""
    from tui.probes import GpuDevice, GpuSnapshot, ProbeSample
    from tui.probes.host import HostSample

    rx = receiver()
    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "5000", "--sleep", "0.01")}
    minutes = 1

    [[variant]]
    id = "broken"
    category = "useful"
    command = ["python", "-c", "raise SystemExit(3)"]
    minutes = 1
    """, f'\n[notify]\nurls = ["{rx.url()}"]\n')
    path.write_text(path.read_text().replace("hours = 1\n", "hours = 4\n"))
    clock = FakeClock()
    procs = FakeProcesses(clock)
    done = []

    def the_test_s_hand(session):
        running = session.engine.state.running
        if not done and running:  # the GPU under the live control is lost
            (run,) = running
            now = clock.wall()
            session.engine.observe_probe(ProbeSample(
                GpuSnapshot(now, "ok", None, (GpuDevice(0, state="lost"),)),
                HostSample(now, disk_free_bytes={})))
            done.append(run.id)
        elif len(done) == 1:  # the fake clock waits for the notices' thread, then the
            wait_for(rx.titles, 60, "the lost GPU told", every=0.05)  # control is stopped
            assert session.stop(done[0], "test over").ok
            done.append("stopped")
        for run in procs.runs:  # `broken` raises SystemExit(3) as soon as it starts
            if run.alive and "raise SystemExit(3)" in run.argv:
                run.exit(3)
    drive_session(path, lambda snap: snap.engine.finished, clock, procs,
                  each=the_test_s_hand)
    assert done[1:] == ["stopped"]
    titles = [re.sub(r"-[0-9a-f]{8}-\d+", "", t) for t in rx.titles()]
    assert titles == ["t: GPU 0 is lost while control is alive", "t: run broken failed"], titles
    assert "exit status 3" in rx.notices()[1]["message"]
