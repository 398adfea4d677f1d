"""The engine as its own process: the room and the CLI are its clients.

Real processes throughout: `itera-tui PATH` (Textual's headless driver) starts a
detached engine and quits leaving it driving; the engine killed -9 comes back
through its supervisor and reattaches from the ledger; two clients and a
headless engine see the same events; every CLI action works against the running
engine with the room's words for a refusal and an exit code a script can branch
on. Every test ends the engines it started, by pid (`servicekit.end_engine`).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from types import SimpleNamespace

import psutil
import pytest

from conftest import run_cli
from servicekit import end_engine, engine_pids, env_with, wait_until
from test_app_support import campaign, events_of
from tui.service.protocol import PROTOCOL_VERSION
from tui.campaign import load_plan
from tui.service.client import EngineClient, unix_transport
from tui.service.paths import socket_path
from tui.service.starter import connect

HEADLESS = {"TEXTUAL_DRIVER": "textual.drivers.headless_driver:HeadlessDriver"}
LONG = ["--steps", "100000", "--sleep", "0.05"]


def launches_per_run(path) -> Counter:
    return Counter(e["run"] for e in events_of(path, "run_launched"))


@pytest.mark.slow
def test_q_closes_the_room_only_the_engine_goes_on_and_stops_on_purpose(tmp_path):
    path = campaign(tmp_path, [("control", "mandatory", LONG)])
    code = ("import json, sys; from tui.cli import main; rc = main(sys.argv[1:]); "
            "print(json.dumps({'rc': rc, 'torch': 'torch' in sys.modules, "
            "'engine': 'tui.engine.engine' in sys.modules}))")
    try:
        room = subprocess.run([sys.executable, "-c", code, str(path)], cwd=tmp_path,
                              env=env_with(**HEADLESS, TEXTUAL_PRESS="q"), text=True,
                              capture_output=True, timeout=120)  # `q` as soon as it is up
        out, err = room.stdout, room.stderr
        report = json.loads(out.strip().splitlines()[-1])
        # the room is a client: it imported neither torch nor the engine
        assert report == {"rc": 0, "torch": False, "engine": False}, err[-2000:]
        assert "goes on driving the campaign" in err
        # nobody is watching and the campaign is still driven: the run is launched
        wait_until(lambda: events_of(path, "run_launched"), 90, "the run's launch")
        pid = wait_until(lambda: engine_pids(tmp_path), 10, "the engine process")
        assert not events_of(path, "engine_stopped")
        proc = run_cli("engine", "status", "--json", str(path), cwd=tmp_path)
        assert proc.returncode == 0 and json.loads(proc.stdout)["pid"] == pid[0]
        # a second room attaches to the same engine: no second engine, no relaunch
        again = subprocess.run([sys.executable, "-c", code, str(path)], cwd=tmp_path,
                               env=env_with(**HEADLESS, TEXTUAL_PRESS="q"), text=True,
                               capture_output=True, timeout=120)
        assert json.loads(again.stdout.strip().splitlines()[-1])["rc"] == 0, again.stderr
        assert len(events_of(path, "engine_started")) == 1
        assert launches_per_run(path) == Counter({events_of(path, "run_launched")[0]["run"]: 1})
        # stopped on purpose: the engine goes, the run is left alone
        stop = run_cli("engine", "stop", str(path), cwd=tmp_path)
        assert stop.returncode == 0, stop.stderr
        wait_until(lambda: not engine_pids(tmp_path), 30, "the engine to end")
        (run_pid,) = [e["pid"] for e in events_of(path, "run_launched")]
        assert psutil.pid_exists(run_pid) and events_of(path, "engine_stopped")
        assert not events_of(path, "run_stop_requested")
        gone = run_cli("checkpoint", "x", str(path), cwd=tmp_path)
        assert gone.returncode == 4 and "no engine" in gone.stderr
    finally:
        end_engine(tmp_path)


@pytest.mark.slow
def test_kill_9_of_the_engine_is_restarted_reattaches_and_the_client_says_so(tmp_path):
    path = campaign(tmp_path, [("control", "mandatory", LONG), ("second", "useful", LONG)],
                    gpus=2)
    plan = load_plan(path)
    client = None
    try:
        client = connect(plan, start=True, name="room")
        seen = []
        client.subscribe(seen.append)
        wait_until(lambda: len(events_of(path, "run_launched")) == 2, 90, "two launches")
        client.step()  # the room has drawn the engine's first snapshot
        (pid,) = wait_until(lambda: engine_pids(tmp_path), 10, "the engine")
        os.kill(pid, signal.SIGKILL)
        wait_until(lambda: client.link.lost, 30, "the client to see the link drop")
        assert "LINK LOST" in _header_decision(plan, client)
        # the supervisor brings it back within seconds, and it reattaches from the ledger
        wait_until(lambda: events_of(path, "engine_restarted"), 30, "the restart")
        (restarted,) = events_of(path, "engine_restarted")
        assert restarted["reason"] == "killed by SIGKILL" and restarted["restarts"] == 1
        wait_until(lambda: not client.link.lost, 30, "the client to reconnect")
        wait_until(lambda: any(e["event"] == "engine_restarted" for e in seen), 30,
                   "the restart event on the client")
        assert [e["seq"] for e in seen] == sorted({e["seq"] for e in seen})  # none twice
        reattached = {e["run"] for e in events_of(path, "run_reattached")}
        assert reattached == {e["run"] for e in events_of(path, "run_launched")}
        assert set(launches_per_run(path).values()) == {1}  # nothing launched twice
        # and it still acts: the rules and the actions are the new engine's
        assert client.pause(True).ok
        wait_until(lambda: events_of(path, "queue_paused"), 20, "the pause")
    finally:
        if client is not None:
            client.close()
        end_engine(tmp_path)


def _header_decision(plan, client) -> str:
    """What the room's header says about the decision (and the link), from the client."""
    from tui.app.room import header_model

    return header_model(plan, client.step()).decision


@pytest.mark.slow
def test_two_clients_and_a_headless_engine_share_runs_events_and_actions(tmp_path):
    path = campaign(tmp_path, [("control", "mandatory", LONG + ["--jsonl"]),
                               ("extra", "useful", LONG)], gpus=2)
    plan = load_plan(path)
    headless = subprocess.Popen([sys.executable, "-m", "tui.cli", "run", "--headless",
                                 str(path)], cwd=tmp_path, env=env_with(), text=True,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    a = b = None
    try:
        wait_until(lambda: socket_path(plan.state_dir).exists() or headless.poll() is not None,
                   60, "the headless engine's socket")
        a = connect(plan, start=False, name="room-a")
        b = connect(plan, start=False, name="room-b")
        got_a, got_b = [], []
        a.subscribe(got_a.append)
        b.subscribe(got_b.append)
        wait_until(lambda: len(events_of(path, "run_launched")) == 2, 60, "two launches")
        runs = {e["target"]: e["run"] for e in events_of(path, "run_launched")}
        assert {r.id for r in a.step().state.runs} == {r.id for r in b.step().state.runs}
        # an action from one face is seen by the other
        assert a.pause(True).ok
        wait_until(lambda: any(e["event"] == "queue_paused" for e in got_b), 20,
                   "b to see a's pause")
        # the CLI acts on the headless engine too
        cli = lambda *args: run_cli(*args, str(path), cwd=tmp_path)  # noqa: E731
        resumed = cli("resume", "--json")
        assert resumed.returncode == 0 and json.loads(resumed.stdout)["ok"] is True
        wait_until(lambda: (a.step().engine.live.get(runs["extra"]) or
                            SimpleNamespace(records=0)).records > 0, 60,
                   "extra's first printed record")  # before it, a request would be sent
        refused = cli("checkpoint", runs["extra"])  # print-only: cannot answer a request
        assert refused.returncode == 1
        assert "cannot checkpoint on request" in refused.stderr  # the room's words
        asked = cli("checkpoint", runs["control"])  # writes SDK records: it can answer
        assert asked.returncode == 0, asked.stderr
        mandatory = cli("stop", runs["control"], "--reason", "test")
        assert mandatory.returncode == 1 and "the control's full run" in mandatory.stderr
        assert "--yes" in mandatory.stderr
        drop_control = cli("drop", "control")
        assert drop_control.returncode == 1 and "mandatory" in drop_control.stderr
        dropped = cli("drop", "extra")
        assert dropped.returncode == 0, dropped.stderr
        wait_until(lambda: any(e["event"] == "variant_dropped" for e in got_a), 20,
                   "the drop on a")
        bad = cli("decide", "sideways")
        assert bad.returncode == 2 and "unknown decision" in bad.stderr
        wait_until(lambda: [e["seq"] for e in got_a][-1:] == [e["seq"] for e in got_b][-1:],
                   20, "both faces to reach the same last event")
        # the same events, in the same order, from the moment both were listening
        since = max(got_a[0]["seq"], got_b[0]["seq"])
        assert [e["seq"] for e in got_a if e["seq"] >= since] == \
            [e["seq"] for e in got_b if e["seq"] >= since]
        # a decision nobody awaits is refused in words, the engine's own
        nothing = cli("decide", "continue")
        assert nothing.returncode == 1 and "no decision" in nothing.stderr.lower()
        stopped = cli("stop", runs["control"], "--reason", "test", "--yes")
        assert stopped.returncode == 0, stopped.stderr
        wait_until(lambda: events_of(path, "run_exited") and headless.poll() is not None, 90,
                   "the headless run to end")
    finally:
        for client in (a, b):
            if client is not None:
                client.close()
        if headless.poll() is None:
            headless.kill()
        headless.communicate(timeout=30)
        end_engine(tmp_path)


@pytest.mark.slow
def test_malformed_oversized_and_unknown_messages_get_an_error_and_change_nothing(tmp_path):
    import random
    import socket as socketlib

    path = campaign(tmp_path, [("control", "mandatory", LONG)])
    plan = load_plan(path)
    client = None
    try:
        client = connect(plan, start=True, name="fuzz")
        sock_file = socket_path(plan.state_dir)
        assert oct(sock_file.stat().st_mode & 0o777) == "0o600"
        wait_until(lambda: events_of(path, "run_launched"), 60, "the launch")
        before = [e for e in events_of(path, "warning")]
        acted = ("queue_paused", "queue_resumed", "run_stop_requested", "decision_taken",
                 "variant_dropped", "checkpoint_requested", "wrapup_started", "engine_stopped")
        rng = random.Random(7)
        cases = [b"", b"{", b"[]", b"null", b"42", b'"x"', b"{}", b'{"op": 1}',
                 b'{"op": "action"}', b'{"op": "action", "id": "1", "action": "stop"}',
                 b'{"op": "action", "id": 1, "action": "rm -rf /"}',
                 b'{"op": "action", "id": 1, "action": "stop", "args": {"run": "$(id)"}}',
                 b'{"op": "action", "id": 1, "action": "stop", "args": []}',
                 b'{"op": "action", "id": 1, "action": "drop", "args": {"variants": 3}}',
                 b'{"op": "action", "id": 1, "action": "pause", "args": {"paused": "yes"}}',
                 b'{"op": "hello", "protocol": 99}', b'{"op": "subscribe", "from_seq": -5}',
                 b"\xff\xfe\x00", b'{"op": "' + b"a" * 70000 + b'"}']
        while len(cases) < 240:
            size = rng.randint(1, 300)
            cases.append(bytes(rng.randint(0, 255) for _ in range(size)).replace(b"\n", b" "))
        answered = 0
        for payload in cases:
            with socketlib.socket(socketlib.AF_UNIX) as s:
                s.settimeout(20)
                s.connect(str(sock_file))
                s.sendall(b'{"op": "hello", "protocol": %d, "client": "fuzz"}\n'
                          % PROTOCOL_VERSION)
                hello = s.makefile("rb").readline()
                assert json.loads(hello)["op"] == "hello"
                s.sendall(payload + b"\n")
                if not payload.strip():
                    continue
                reader = s.makefile("rb")
                reply = json.loads(reader.readline())
                assert reply["op"] in ("error", "result"), reply
                if reply["op"] == "result":
                    assert reply["ok"] is False, (payload[:80], reply)
                answered += 1
        assert answered >= 200
        assert client.ping()  # the engine lives and answers
        # nothing changed: no action reached the ledger, no warning was written
        assert not [e for e in events_of(path, "warning")[len(before):]]
        assert not [kind for kind in acted if events_of(path, kind)]
    finally:
        if client is not None:
            client.close()
        end_engine(tmp_path)


@pytest.mark.slow
def test_a_protocol_mismatch_is_refused_in_words(tmp_path):
    import socket as socketlib

    path = campaign(tmp_path, [("control", "mandatory", LONG)])
    plan = load_plan(path)
    try:
        connect(plan, start=True).close()
        with socketlib.socket(socketlib.AF_UNIX) as s:
            s.settimeout(20)
            s.connect(str(socket_path(plan.state_dir)))
            future = PROTOCOL_VERSION + 1
            s.sendall(b'{"op": "hello", "protocol": %d, "client": "future"}\n' % future)
            reply = json.loads(s.makefile("rb").readline())
        assert reply["op"] == "error" and f"protocol {future}" in reply["message"]
        assert "same itera-tui version" in reply["message"]
    finally:
        end_engine(tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"),
                    reason="makes a test user (needs root and the system python)")
def test_the_socket_is_refused_to_another_user():
    """The campaign folder is open to everyone (0755 all the way down): only the socket's
    own mode (0600) and the engine's peer-credential check keep another uid out."""
    import pwd
    import shutil
    import tempfile
    from pathlib import Path

    user = "iteratest"
    try:
        pwd.getpwnam(user)
    except KeyError:
        made = subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin",
                               user], capture_output=True, text=True)
        if made.returncode != 0:
            pytest.skip(f"useradd failed: {made.stderr.strip()}")
    root = Path(tempfile.mkdtemp(prefix="itera-uid-", dir="/tmp"))
    try:
        os.chmod(root, 0o755)
        path = campaign(root, [("control", "mandatory", LONG)])
        plan = load_plan(path)
        connect(plan, start=True).close()
        os.chmod(plan.state_dir, 0o755)
        probe = ("import socket, sys\n"
                 "s = socket.socket(socket.AF_UNIX)\n"
                 "try:\n    s.connect(sys.argv[1])\nexcept PermissionError:\n"
                 "    print('refused'); sys.exit(0)\n"
                 "s.sendall(b'{\"op\": \"hello\", \"protocol\": 1}\\n')\n"
                 "print('answered' if s.recv(100) else 'closed')\n")
        uid = pwd.getpwnam(user).pw_uid
        out = subprocess.run(["/usr/bin/python3", "-c", probe,
                              str(socket_path(plan.state_dir))], cwd="/",
                             capture_output=True, text=True, timeout=30, env={},
                             preexec_fn=lambda: (os.setgid(uid), os.setuid(uid)))
        assert out.stdout.strip() == "refused", out.stdout + out.stderr
        assert connect(plan, start=False).ping()  # its owner still gets in
    finally:
        end_engine(root)
        shutil.rmtree(root, ignore_errors=True)


@pytest.mark.slow
def test_a_room_whose_engine_was_stopped_says_why_and_starts_it_again(tmp_path):
    path = campaign(tmp_path, [("control", "mandatory", LONG)])
    plan = load_plan(path)
    client = None
    try:
        client = connect(plan, start=True, name="room")
        wait_until(lambda: events_of(path, "run_launched"), 60, "the launch")
        stop = run_cli("engine", "stop", str(path), cwd=tmp_path)
        assert stop.returncode == 0, stop.stderr
        wait_until(lambda: client.link.lost, 30, "the room to see the engine go")
        assert "stopped on purpose" in (client.link.detail or "")
        assert "r starts it" in _header_decision(plan, client)
        # nothing restarts it: it was stopped on purpose (the supervisor ends with it)
        wait_until(lambda: not engine_pids(tmp_path) and not engine_pids(tmp_path, "supervise"),
                   60, "the engine and its supervisor to end")
        assert "the supervisor ends" in (tmp_path / ".itera" / "engine.log").read_text()
        assert not events_of(path, "engine_restarted")
        result = client.start_engine()
        assert result.ok, result.message
        wait_until(lambda: not client.link.lost, 60, "the room to reconnect")
        assert len(events_of(path, "engine_started")) == 2
        assert set(launches_per_run(path).values()) == {1}  # the run was adopted, not redone
    finally:
        if client is not None:
            client.close()
        end_engine(tmp_path)


@pytest.mark.slow
def test_a_finished_campaign_s_engine_is_said_finished_not_driving(tmp_path):
    """Issue 44, item 5: once the campaign is over, `engine status` and the room's `q` say
    it is finished and why its engine stays (to answer; it goes by itself when idle)."""
    path = campaign(tmp_path, [("control", "mandatory", ["--steps", "5"])])
    try:
        started = run_cli("engine", "start", str(path), cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        assert re.search(r"\(pid \d+\) drives", started.stdout)  # driving, while it is

        def finished():
            done = run_cli("engine", "status", "--json", str(path), cwd=tmp_path)
            return done.returncode == 0 and json.loads(done.stdout)["finished"]

        wait_until(finished, 180, "the campaign to finish")
        said = run_cli("engine", "status", str(path), cwd=tmp_path)
        assert said.returncode == 0, said.stderr
        assert not re.search(r"\(pid \d+\) drives", said.stdout)
        assert "nothing left to drive; its engine (pid" in said.stdout
        assert "stays only to answer `itera-tui` and `itera-tui status`" in said.stdout
        assert "min after the last room closes" in said.stdout
        code = "import sys; from tui.cli import main; sys.exit(main(sys.argv[1:]))"
        room = subprocess.run([sys.executable, "-c", code, str(path)], cwd=tmp_path,
                              env=env_with(**HEADLESS, TEXTUAL_PRESS="q"), text=True,
                              capture_output=True, timeout=120)
        assert room.returncode == 0, room.stderr[-2000:]
        assert "goes on driving" not in room.stderr
        assert "itera-tui: the campaign is finished; its engine (pid" in room.stderr
    finally:
        end_engine(tmp_path)
