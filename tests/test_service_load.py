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
"""
NON_FINITE = '[[stop]]\nrule = "non_finite"\nmetrics = ["loss"]\n'


def ledger_events(root, name: str) -> list[dict]:
    path = root / ".itera" / "ledger.jsonl"
    return [e for e in read_ledger(path) if e["event"] == name] if path.exists() else []


@contextmanager
def served(tmp_path, **kw):
    """The engine service in this process: its loop in a thread, real runs."""
    plan = load_campaign(write_plan(tmp_path, NAN_RUN, NON_FINITE))
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
