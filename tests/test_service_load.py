"""The engine stays in charge under load: action floods, connection floods, clients that never read.

Real runs, a real engine service on its real Unix socket, real clients; the
service is driven in this process (its own thread) so a test can look at
what a pass of its loop did, or as the detached engine (its own process,
under a low file-descriptor limit). Every engine, run and socket a test
starts is ended in a `finally`.
"""

from __future__ import annotations

import json
import socket
import threading
from collections import Counter
from contextlib import contextmanager

import pytest

from enginekit import printer_cmd, write_plan
from servicekit import end_engine, wait_until
from tui.engine import read_ledger
from tui.service.client import EngineClient, unix_transport
from tui.service.paths import socket_path
from tui.service.protocol import PROTOCOL_VERSION, ActionKind, action_message, encode
from tui.service.outbox import OutboxLimits
from tui.service.server import (REQUESTS_PER_TICK, WAITING_PER_CLIENT, EngineService,
                                WrapupPolicy)
from tui.session import CampaignSession, load_campaign

pytestmark = pytest.mark.slow  # real runs and engines

NAN_RUN = f"""
[[variant]]
id = "v"
category = "mandatory"
command = {printer_cmd("--steps", "100000", "--nan-at", "60", "--sleep", "0.02")}
minutes = 1

[[variant]]
id = "w"
category = "mandatory"
command = {printer_cmd("--steps", "100000", "--sleep", "0.05")}
minutes = 1
"""  # w keeps the campaign going after v's NaN stop: the loop serves till the test ends
NON_FINITE = '[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n'


def ledger_events(root, name: str) -> list[dict]:
    path = root / ".itera" / "ledger.jsonl"
    return [e for e in read_ledger(path) if e["event"] == name] if path.exists() else []


@contextmanager
def served(tmp_path, **kw):
    """The engine service in this process: its loop in a thread, real runs."""
    plan = load_campaign(write_plan(tmp_path, NAN_RUN, NON_FINITE, gpus=2))
    session = CampaignSession(plan, poll_interval=0.05).open()
    service = EngineService(session, socket_path(plan.state_dir), poll_interval=0.05,
                            wrapup=WrapupPolicy.NEVER, hold_continue=False, **kw)
    loop, ended = None, []

    def serve():
        try:
            ended.append(service.serve())
        except BaseException as exc:  # the test says how the loop died, if it did
            ended.append(exc)
            raise

    try:
        service.listen()
        loop = threading.Thread(target=serve, name="test-serve", daemon=True)
        loop.start()
        yield plan, session, service
        assert not ended, f"the engine's loop ended during the test: {ended!r}"
    finally:
        service.request_stop()
        if loop is not None:
            loop.join(30)
        service.close()
        session.close()
        end_engine(tmp_path)  # the runs, by the pids the ledger names


def raw_client(path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(path))
    sock.sendall(encode({"op": "hello", "protocol": PROTOCOL_VERSION, "client": "flood"}))
    return sock


def read_lines(sock: socket.socket, want: int, into: list) -> None:
    """Read `want` JSON lines (or to EOF) into `into`, on a thread of its own."""
    buf = b""
    while len(into) < want:
        try:
            data = sock.recv(1 << 20)
        except OSError:
            return
        if not data:
            return
        buf += data
        *lines, buf = buf.split(b"\n")
        into.extend(json.loads(line) for line in lines if line.strip())


def test_an_action_flood_is_refused_in_words_and_the_rules_still_run_every_pass(tmp_path):
    flood = 20000
    with served(tmp_path) as (plan, session, service):
        # how many of the flood's actions the engine took between two of its ticks
        taken, between = Counter(), []
        session.subscribe(lambda ev: taken.update([ev["event"]])
                          if ev["event"] in ("queue_paused", "queue_resumed") else None)
        tick = session.engine.tick

        def counted_tick():
            between.append(taken["queue_paused"] + taken["queue_resumed"])
            tick()

        session.engine.tick = counted_tick
        wait_until(lambda: ledger_events(tmp_path, "run_launched"), 60, "the run's launch")
        sock = raw_client(socket_path(plan.state_dir))
        replies: list = []
        reader = threading.Thread(target=read_lines, args=(sock, flood + 1, replies),
                                  daemon=True)
        reader.start()
        other = None
        try:
            lines = b"".join(encode(action_message(i, ActionKind.PAUSE, paused=i % 2 == 0))
                             for i in range(flood))
            sock.sendall(lines)
            # another client is not held back by the flooding one
            other = EngineClient(unix_transport(socket_path(plan.state_dir)), name="other",
                                 reconnect=False, snapshots=False).open(history=0)
            answer = other.pause(True)
            assert answer.ok and "refused" not in answer.message, answer
            reader.join(120)
            results = [r for r in replies if r.get("op") == "result"]
            assert len(results) == flood, f"{len(results)} of {flood} answered"
            refused = [r for r in results if not r["ok"] and "refused" in r["message"]]
            # every line was answered; past the client's share, refused at once, in words
            assert len(refused) > flood // 2
            assert f"{WAITING_PER_CLIENT} requests from this client are still waiting" \
                in refused[0]["message"] and "stop rules" in refused[0]["message"]
            # the rules ran before every bounded share of actions: never more in one pass
            steps = [b - a for a, b in zip(between, between[1:])]
            assert steps and max(steps) <= REQUESTS_PER_TICK, max(steps)
            # and the NaN run was stopped by its rule
            fired = wait_until(lambda: ledger_events(tmp_path, "stop_rule_fired"), 60,
                               "the non_finite rule")
            assert fired[0]["rule"] == "non_finite"
        finally:
            if other is not None:
                other.close()
            sock.close()


NAN_WHEN_TOLD = '''\
import os, sys, time
step = 0
while True:
    step += 1
    told = os.path.exists(os.path.join(os.environ["ITERA_RUN_DIR"], "..", "..", "..", "nan.flag"))
    print(f"step {step} loss: {'nan' if told else 1.0 / step:} acc=0.5", flush=True)
    time.sleep(0.05)
'''
FD_LIMIT = 128  # the detached engine's descriptor limit in the flood tests


def detached_engine(tmp_path, fd_limit: int = FD_LIMIT):
    """The supervisor and its engine, as `itera-tui` starts them, under a low descriptor
    limit; a run that prints NaN once `nan.flag` exists in the campaign folder."""
    import resource
    import subprocess
    import sys

    from servicekit import env_with

    variants = """
    [[variant]]
    id = "v"
    category = "mandatory"
    command = ["python", "scripts/nan_when_told.py"]
    minutes = 1
    """
    path = write_plan(tmp_path, variants, NON_FINITE)
    (tmp_path / "scripts" / "nan_when_told.py").write_text(NAN_WHEN_TOLD)

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))

    log = open(tmp_path / "supervisor.log", "ab")
    try:
        proc = subprocess.Popen([sys.executable, "-m", "tui.service.daemon", "supervise",
                                 str(path)], cwd=tmp_path, env=env_with(), stdout=log,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                preexec_fn=low_limit, start_new_session=True)
    finally:
        log.close()
    return load_campaign(path), proc


def hello_answer(path, timeout: float = 5.0):
    """Connect and say hello: (the socket, the engine's first line), or (None, why)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        sock.connect(str(path))
        try:
            sock.sendall(encode({"op": "hello", "protocol": PROTOCOL_VERSION,
                                 "client": "flood"}))
        except BrokenPipeError:
            pass  # refused at once: its reason is there to read
        buf = b""
        while b"\n" not in buf:
            data = sock.recv(65536)
            if not data:
                break
            buf += data
    except OSError as exc:
        sock.close()
        return None, f"{type(exc).__name__}: {exc}"
    if not buf:
        sock.close()
        return None, "closed without a word"
    return sock, json.loads(buf.split(b"\n")[0])


def test_a_connection_flood_is_answered_busy_and_the_engine_keeps_driving(tmp_path):
    """More connections than the engine has descriptors: each past the cap is answered
    "busy" (never left hanging on a full listen queue), the engine never runs out (no exit
    5, no restart), and the NaN that comes during the flood is stopped by its rule; a CLI
    action is told "busy" (exit 6) while the flood holds, and goes through once it ends."""
    from conftest import run_cli

    plan, supervisor = detached_engine(tmp_path)
    held = []
    try:
        where = socket_path(plan.state_dir)
        wait_until(lambda: ledger_events(tmp_path, "run_launched"), 90, "the run's launch")
        engine = wait_until(lambda: ledger_events(tmp_path, "engine_started"), 10, "engine")
        answers = []
        for _ in range(3 * FD_LIMIT):
            sock, first = hello_answer(where)
            answers.append(first)
            if sock is not None:
                held.append(sock)
            elif not isinstance(first, dict):
                break  # left unanswered (a full listen queue): the flood locked us out
        greeted = [a for a in answers if isinstance(a, dict) and a.get("op") == "hello"]
        busy = [a for a in answers if isinstance(a, dict) and a.get("op") == "error"
                and str(a.get("message", "")).startswith("busy:")]
        assert greeted and len(greeted) <= FD_LIMIT // 4, len(greeted)
        assert len(greeted) + len(busy) == len(answers), [a for a in answers
                                                          if a not in greeted + busy][:3]
        # a CLI action while the flood holds every slot: retried briefly, then "busy"
        proc = run_cli("pause", str(plan.path), cwd=tmp_path)
        assert proc.returncode == 6 and "busy" in proc.stderr, (proc.returncode, proc.stderr)
        (tmp_path / "nan.flag").write_text("now")  # the NaN comes during the flood
        fired = wait_until(lambda: ledger_events(tmp_path, "stop_rule_fired"), 60,
                           "the non_finite rule during the flood")
        assert fired[0]["rule"] == "non_finite"
        for sock in held:
            sock.close()
        held.clear()
        proc = run_cli("pause", str(plan.path), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        # the same engine all along: it never stopped for want of descriptors
        assert supervisor.poll() is None
        assert ledger_events(tmp_path, "engine_started") == engine
        assert not ledger_events(tmp_path, "engine_restarted")
    finally:
        for sock in held:
            sock.close()
        end_engine(tmp_path)
        supervisor.wait(30)


def test_clients_that_never_read_cost_a_bounded_total_and_a_dropped_one_resumes(tmp_path):
    """Twenty clients take snapshots and never read: together they never hold more than
    the one global cap (each one over it is dropped with the reason); a room whose reading
    stalls is dropped too, and once it reads again it reconnects from its last seq and has
    every event, in order, none twice."""
    limits = OutboxLimits(total=256 * 1024, stall_s=3.0)
    with served(tmp_path, outbox_limits=limits) as (plan, session, service):
        where = socket_path(plan.state_dir)
        wait_until(lambda: ledger_events(tmp_path, "run_launched"), 60, "the runs' launch")
        silent = []
        for _ in range(20):
            sock = raw_client(where)
            sock.sendall(encode({"op": "subscribe", "from_seq": None, "snapshots": True,
                                 "history": 0}))
            silent.append(sock)
        gate, seen = threading.Event(), []
        follower = EngineClient(unix_transport(where), name="follower",
                                backoff=(0.1,)).open(history=0)
        follower.subscribe(lambda ev: (seen.append(ev["seq"]), gate.wait(120)))
        actor = EngineClient(unix_transport(where), name="actor", snapshots=False,
                             reconnect=False).open(history=0)
        peak, sampling = [0], threading.Event()

        def sample():
            while not sampling.is_set():
                with service.hub.lock:
                    held = sum(len(c.wbuf) for c in service.hub.clients.values())
                peak[0] = max(peak[0], held)
                sampling.wait(0.005)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            last = None
            for i in range(1500):
                assert actor.pause(i % 2 == 0).ok
                if i == 0:
                    wait_until(lambda: seen, 10, "the follower's first event")
            last = ledger_events(tmp_path, "queue_resumed")[-1]["seq"]
            wait_until(lambda: service.hub.dropped_behind >= len(silent) + 1, 60,
                       "the silent clients and the stalled room dropped")
            # never more than the cap, all clients together (one frame and a reason over)
            assert peak[0] <= limits.total + 128 * 1024, peak[0]
            gate.set()  # the stalled room reads again: it resumes from its last seq
            wait_until(lambda: seen and seen[-1] >= last, 60, "the follower caught up")
            assert seen == list(range(seen[0], seen[-1] + 1)), "a gap or a repeat"
            assert follower.link.state.value == "connected"
        finally:
            sampling.set()
            gate.set()
            actor.close()
            follower.close()
            for sock in silent:
                sock.close()


HUB_OUT_OF_FDS = '''\
import json, os, resource, sys
from pathlib import Path
from tui.service.hub import SocketHub
resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
hub = SocketHub(Path(sys.argv[1]), greet=lambda: {"op": "hello"}, submit=lambda c, r: None)
hub.per_uid = 10_000  # the cap aside: only the descriptors bound it here
hub.listen()
held = []
try:
    while True:
        held.append(os.open(os.devnull, os.O_RDONLY))
except OSError:
    pass
for _ in range(2):
    os.close(held.pop())  # room for two connections, then none
print("ready", flush=True)
sys.stdin.readline()
print(json.dumps({"busy_refused": hub.busy_refused, "clients": len(hub.clients)}), flush=True)
'''


def test_out_of_descriptors_a_connection_is_answered_busy_by_the_reserve(tmp_path):
    """The process has no descriptor left: a connection is still answered, "busy", in
    words (the hub lets its reserved descriptor go for it), never left hanging."""
    import subprocess
    import sys

    from servicekit import env_with

    where = tmp_path / "hub.sock"
    proc = subprocess.Popen([sys.executable, "-c", HUB_OUT_OF_FDS, str(where)], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env_with())
    held = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        answers = []
        for _ in range(6):
            sock, first = hello_answer(where)
            answers.append(first)
            if sock is not None:
                held.append(sock)
        hellos = [a for a in answers if isinstance(a, dict) and a.get("op") == "hello"]
        busy = [a for a in answers if isinstance(a, dict) and str(a.get("message", ""))
                .startswith("busy: the engine has no file descriptor left")]
        assert hellos and busy and len(hellos) + len(busy) == len(answers), answers
        proc.stdin.write("\n")
        proc.stdin.flush()
        said = json.loads(proc.stdout.readline())
        assert said["busy_refused"] == len(busy) and said["clients"] == len(hellos)
    finally:
        for sock in held:
            sock.close()
        proc.kill()
        proc.wait(10)
