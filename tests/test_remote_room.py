"""A room on this box follows an engine on another box through the user's own ssh.

A real sshd on 127.0.0.1 (tests/sshkit.py: temp host key, temp authorized key,
BatchMode, never a password) is "the other box"; a second folder holds the
campaign there. The client runs `ssh box2 itera-tui attach --stdio --start DIR`,
which starts the far engine detached. sshd is killed mid-run: the far runs go on
and the far engine's rules still fire (a NaN run stopped while the link is down),
the client says the link is lost; sshd comes back and the client catches up with
every event, none twice.
"""

from __future__ import annotations

import sys

import pytest

from servicekit import end_engine, wait_until
from sshkit import ALIAS, needs_sshd, sshd  # noqa: F401 - sshd is a fixture
from test_app_support import campaign, events_of, ledger
from tui.service.remote import REMOTE_COMMAND_ENV, remote_client, split_host

LONG = ["--steps", "100000", "--sleep", "0.05"]


def test_host_spec_is_a_destination_and_a_folder():
    assert split_host("me@gpu2:~/camp") == ("me@gpu2", "~/camp")
    assert split_host("root@203.0.113.7 -p 40022:/srv/camp") == ("root@203.0.113.7 -p 40022",
                                                                 "/srv/camp")
    from tui.service.client import EngineUnavailable

    with pytest.raises(EngineUnavailable, match="DEST:DIR"):
        split_host("gpu2")


@needs_sshd
@pytest.mark.slow
def test_the_room_follows_a_far_engine_and_catches_up_after_the_link_drops(sshd, tmp_path,
                                                                             monkeypatch):
    far = tmp_path / "box2"
    far.mkdir()
    path = campaign(far, [("control", "mandatory", LONG),
                          ("nanny", "exploratory", ["--steps", "100000", "--sleep", "0.05",
                                                    "--nan-at", "200"])], gpus=2,
                    extra='[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n')
    for key, value in sshd.client_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(REMOTE_COMMAND_ENV, f"{sys.executable} -m tui.cli")
    client = None
    try:
        client = remote_client(f"{ALIAS}:{far}")
        assert {v.id for v in client.plan.variants} == {"control", "nanny"}  # its frozen plan
        seen = []
        client.subscribe(seen.append)
        wait_until(lambda: len(events_of(path, "run_launched")) == 2, 120, "two far launches")
        wait_until(lambda: any(e["event"] == "run_launched" for e in seen)
                   or len(client.history(1000)) >= len(ledger(path)) - 2, 30,
                   "the launches on the client")
        sshd.kill()  # the link drops; nothing on the far box is touched
        wait_until(lambda: client.link.lost, 60, "the client to see the link lost")
        assert client.step().link.lost
        # the far engine's rules go on with no client: the NaN run is stopped meanwhile
        fired = wait_until(lambda: [e for e in events_of(path, "stop_rule_fired")
                                    if e["rule"] == "non_finite"], 120, "the far NaN stop")
        assert client.link.lost  # it happened while the link was down
        assert not any(e["seq"] == fired[0]["seq"] for e in seen)
        control = [e for e in events_of(path, "run_launched") if e["target"] == "control"]
        assert not [e for e in events_of(path, "run_exited") if e["run"] == control[0]["run"]]
        sshd.start()
        wait_until(lambda: not client.link.lost, 90, "the client to reconnect")
        wait_until(lambda: any(e["seq"] == fired[0]["seq"] for e in seen), 60,
                   "the stop caught up")
        # every event, none twice: the client's stream is the far ledger's
        far_seqs = [e["seq"] for e in ledger(path)]
        got = [e["seq"] for e in client.history(10_000)]
        assert got == sorted(set(got))
        wait_until(lambda: [e["seq"] for e in client.history(10_000)] ==
                   [e["seq"] for e in ledger(path)][:len(client.history(10_000))]
                   and len(client.history(10_000)) >= len(far_seqs), 30, "the whole stream")
        # actions go through the pipe as on this box
        assert client.pause(True).ok
        wait_until(lambda: events_of(path, "queue_paused"), 30, "the far pause")
    finally:
        if client is not None:
            client.close()
        end_engine(far)


@needs_sshd
@pytest.mark.slow
def test_the_first_box_s_room_shows_every_box_and_acts_on_each(sshd, tmp_path, monkeypatch):
    """A campaign of two lots: the first box's detached engine starts the second box's
    share through ssh; the room's source (a fleet) holds the runs of both boxes, tags the
    far box's events with its box, and a pause goes to each box."""
    from boxkit import far_root, two_box_campaign
    from tui.campaign import load_plan
    from tui.service.fleet import FleetSource, open_fleet
    from tui.service.starter import connect

    for key, value in sshd.client_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(REMOTE_COMMAND_ENV, f"{sys.executable} -m tui.cli")
    slow = '["python", "deliver.py", "--label", "wide", "--acc-end", "0.80", "--sleep", "0.2"]'
    path = two_box_campaign(tmp_path / "first", wide=slow)
    plan = load_plan(path)
    far = far_root(sshd)
    fleet = None
    try:
        fleet = open_fleet(plan, connect(plan, start=True, name="room"))
        assert isinstance(fleet, FleetSource) and list(fleet.others) == ["box2"]
        snap = wait_until(lambda: (lambda s: s if {r.target for r in s.state.runs
                                                    if r.kind == "run"} >= {"control", "wide"}
                                   else None)(fleet.step()), 240,
                          f"both boxes' runs ({fleet.others['box2'].link})")
        wide = next(r for r in snap.state.runs if r.target == "wide")
        assert wide.lot == "b" and wide.id in snap.engine.live or wide.state != "running"
        # `status` on the first box tells the same fleet: the far run, from box2's ledger
        import json

        from clikit import cli

        status = json.loads(cli("status", "--json", str(path), cwd=path.parent).stdout)
        assert [b["box"] for b in status["boxes"]] == ["box2"], status["boxes"]
        assert status["boxes"][0]["missing"] is None, status["boxes"]
        far_run = [r for r in status["runs"] if r["variant"] == "wide" and r["id"]]
        assert far_run and far_run[0]["id"] == wide.id and far_run[0]["box"] == "box2", far_run
        far_events = [e for e in fleet.history(1000) if e.box == "box2"]
        assert any(e["event"] == "run_launched" and e["target"] == "wide" for e in far_events)
        assert not any(e["event"] == "run_launched" and e["target"] == "wide"
                       for e in ledger(path))  # it ran there, not here
        assert fleet.pause(True).ok
        wait_until(lambda: events_of(path, "queue_paused")
                   and [e for e in ledger(far / "campaign.toml") if e["event"] == "queue_paused"],
                   60, "the pause on both boxes")
    finally:
        if fleet is not None:
            fleet.close()
        end_engine(tmp_path / "first")
        end_engine(far)


NAN_WHEN_TOLD = '''\
import os, sys, time
from tui import training
run = training.attach()
flag = os.path.join(os.path.dirname(os.path.abspath(__file__)), "nan.flag")
step = 0
while not run.stop_requested():
    step += 1
    run.log(step, loss=float("nan") if os.path.exists(flag) else 1.0 / step, acc=0.5)
    time.sleep(0.05)
'''


@needs_sshd
@pytest.mark.slow
def test_the_fleet_room_under_a_lost_link_shows_the_far_box_unreachable_and_catches_up(
        sshd, tmp_path, monkeypatch):
    """A two-box campaign, the room following both boxes: the far sshd is killed; the
    room says the far box is unreachable and since when; the far NaN comes meanwhile and
    its own engine stops it; sshd comes back and the room has every far event, in order,
    none twice."""
    from boxkit import far_root, two_box_campaign
    from tui.app.room import link_text
    from tui.campaign import load_plan
    from tui.service.fleet import open_fleet
    from tui.service.starter import connect

    for key, value in sshd.client_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv(REMOTE_COMMAND_ENV, f"{sys.executable} -m tui.cli")
    root = tmp_path / "first"
    root.mkdir()
    (root / "nan_when_told.py").write_text(NAN_WHEN_TOLD)
    path = two_box_campaign(root, wide='["python", "nan_when_told.py"]',
                            extra='[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n')
    plan = load_plan(path)
    far = far_root(sshd)
    fleet = None
    try:
        fleet = open_fleet(plan, connect(plan, start=True, name="room"))
        far_seen = []
        fleet.subscribe(lambda ev: far_seen.append(ev) if ev.box == "box2" else None)
        wait_until(lambda: any(e["event"] == "run_launched" for e in far_seen), 240,
                   "the far run's launch, in the room")
        sshd.kill()  # the link to box2 drops; nothing there is touched
        text = wait_until(lambda: link_text(fleet.step().link), 60, "the room to say so")
        assert "LINK LOST to the engine on box2 since " in text, text
        (far / "nan.flag").write_text("now")  # the far NaN comes while nobody can see it
        fired = wait_until(lambda: [e for e in ledger(far / "campaign.toml")
                                    if e["event"] == "stop_rule_fired"], 120,
                           "the far engine's own NaN stop")
        assert fired[0]["rule"] == "non_finite"
        assert link_text(fleet.step().link) is not None  # it happened while the link was down
        assert not any(e["seq"] == fired[0]["seq"] for e in far_seen)
        sshd.start()
        wait_until(lambda: any(e["seq"] == fired[0]["seq"] for e in far_seen), 120,
                   "the far stop in the room once the link is back")
        assert link_text(fleet.step().link) is None
        seqs = [e["seq"] for e in far_seen]
        assert seqs == sorted(set(seqs)), "a far event twice or out of order"
        far_seqs = [e["seq"] for e in ledger(far / "campaign.toml")]
        assert seqs == [s for s in far_seqs if seqs[0] <= s <= seqs[-1]], "a far event missed"
    finally:
        if fleet is not None:
            fleet.close()
        end_engine(root)
        end_engine(far)
