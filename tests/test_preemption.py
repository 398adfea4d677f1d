"""A provider's preemption notice (`[engine] preemption`): read over real HTTP on
127.0.0.1 from a server that answers as AWS's instance metadata (IMDSv2, a token
first), Google Cloud's metadata or a host's own URL do; and, end to end, a notice
read while the runs train makes the engine do what a system SIGTERM does: each run
checkpoints, is ended by the engine, and is cut for `resume`, and the engine goes.

The metadata servers here stand in for what this machine cannot have (a cloud's
link-local metadata service); the readers are the product's, over real sockets.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from clikit import cli
from conftest import run_cli
from enginekit import control_only, script_cmd, write_plan
from servicekit import end_engine
from tui.campaign import PlanError, load_plan
from tui.engine import read_ledger, replay
from tui.service import preemption


class Answering(BaseHTTPRequestHandler):
    """A handler that answers in one call and keeps the test's output quiet."""

    def log_message(self, *args):
        pass

    def _answer(self, status: int, body: str = "") -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class Served:
    """An HTTP server on 127.0.0.1 with `handler`, on a thread; ended in `close`."""

    def serve(self, handler, server_class=ThreadingHTTPServer) -> None:
        self.server = server_class(("127.0.0.1", 0), handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        # shutdown() waits for the loop's next look at its flag: a 20th of a second, not half
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,),
                                       daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Metadata(Served):
    """An HTTP server on 127.0.0.1 whose notice can be posted; ended in `close`."""

    def __init__(self):
        self.posted: str | None = None  # the notice's body once posted
        self.requests: list[tuple] = []  # (method, path, headers: any case reads them)
        meta = self

        class Handler(Answering):
            def do_PUT(self):  # noqa: N802 (http.server's names)
                meta.requests.append(("PUT", self.path, self.headers))
                if self.path == "/latest/api/token" and \
                        self.headers.get("X-aws-ec2-metadata-token-ttl-seconds"):
                    self._answer(200, "token-abc")
                else:
                    self._answer(400)

            def do_GET(self):  # noqa: N802
                meta.requests.append(("GET", self.path, self.headers))
                if self.path == "/latest/meta-data/spot/instance-action":
                    if self.headers.get("X-aws-ec2-metadata-token") != "token-abc":
                        self._answer(401)  # IMDSv2: no token, no answer
                    elif meta.posted is None:
                        self._answer(404)
                    else:
                        self._answer(200, meta.posted)
                elif self.path == "/computeMetadata/v1/instance/preempted":
                    if self.headers.get("Metadata-Flavor") != "Google":
                        self._answer(403)
                    else:
                        self._answer(200, "TRUE" if meta.posted else "FALSE")
                elif self.path == "/notice":
                    self._answer(404) if meta.posted is None else self._answer(200, meta.posted)
                else:
                    self._answer(404)

        self.serve(Handler)


def with_engine(path, lines: str):
    """`lines` added to the [engine] table write_plan writes."""
    text = path.read_text()
    assert "[engine]\n" in text
    path.write_text(text.replace("[engine]\n", f"[engine]\n{lines}\n", 1))
    return path


@pytest.fixture
def metadata():
    server = Metadata()
    try:
        yield server
    finally:
        server.close()


def test_the_aws_notice_is_read_with_an_imdsv2_token_and_only_once_posted(metadata):
    assert preemption.read_aws(metadata.base) is None  # 404: nothing scheduled
    metadata.posted = json.dumps({"action": "terminate", "time": "2026-12-02T05:40:00Z"})
    notice = preemption.read_aws(metadata.base)
    assert notice == preemption.Notice("aws", "AWS spot terminate at 2026-12-02T05:40:00Z")
    gets = [r for r in metadata.requests if r[0] == "GET"]
    assert gets and all(h.get("X-aws-ec2-metadata-token") == "token-abc" for _, _, h in gets)


def test_the_gcp_notice_needs_its_header_and_a_true(metadata):
    assert preemption.read_gcp(metadata.base) is None
    metadata.posted = "yes"
    assert preemption.read_gcp(metadata.base).source == "gcp"
    assert all(h.get("Metadata-Flavor") == "Google" for _, _, h in metadata.requests)


def test_a_host_url_notice_and_what_is_not_one(metadata):
    url = metadata.base + "/notice"
    assert preemption.read_url(url) is None  # 404
    for nothing in ("", "false", " FALSE \n"):
        metadata.posted = nothing
        assert preemption.read_url(url) is None, nothing
    metadata.posted = "reclaimed in 90 s\x1b[2J"  # what a host prints is never raw
    notice = preemption.read_url(url)
    assert notice.text.startswith("preemption notice: reclaimed in 90 s")
    assert "\x1b" not in notice.text


def test_the_watch_says_once_it_cannot_read_and_calls_back_once(metadata):
    lines, seen = [], []
    dead = preemption.PreemptionWatch("http://127.0.0.1:9/notice", seen.append, lines.append,
                                      poll_s=0.01)
    for _ in range(3):
        assert dead.poll_once() is None
    assert len(lines) == 1 and "cannot be read" in lines[0]
    metadata.posted = "going"
    watch = preemption.PreemptionWatch(metadata.base + "/notice", seen.append, lines.append,
                                       poll_s=0.01).start()
    watch._thread.join(10)
    assert not watch._thread.is_alive() and len(seen) == 1 and seen[0].text.endswith("going")


def test_the_plan_takes_a_provider_or_a_url_and_names_anything_else(tmp_path):
    def plan_with(value: str):
        root = tmp_path / value.replace("/", "_").replace(":", "_")
        root.mkdir(exist_ok=True)
        return load_plan(with_engine(write_plan(root, control_only('["python", "-c", "pass"]')),
                                     f'preemption = "{value}"'), check_files=False)

    assert plan_with("aws").preemption == "aws"
    assert plan_with("https://host.example/notice").preemption == "https://host.example/notice"
    assert plan_with("none").preemption is None
    from tui.campaign.summary import check_summary, render_check

    said = render_check(check_summary(plan_with("gcp")))  # what `check` prints of it
    assert "box end: a SIGTERM from the system or a preemption notice (gcp, read every 5 s)" \
        in said and "on a new box only with [store]" in said
    assert "box end:" not in render_check(check_summary(plan_with("none")))
    assert plan_with("azure").preemption == "azure"
    with pytest.raises(PlanError) as bad:
        plan_with("oracle")
    assert "engine.preemption: expected aws|gcp|azure|none or an http(s):// URL" \
        in str(bad.value)


def training(root) -> bool:
    """A run of the campaign at `root` is live and has written a metric."""
    ledger = root / ".itera/ledger.jsonl"
    if not ledger.exists():
        return False
    runs = replay(read_ledger(ledger)).runs
    return any(r.alive and r.kind == "run" for r in runs) and any(
        (root / ".itera/runs" / r.id / "metrics.jsonl").exists() for r in runs)


@pytest.mark.slow
def test_a_notice_read_mid_run_checkpoints_every_run_and_cuts_it(metadata, tmp_path):
    root = tmp_path / "camp"
    root.mkdir()
    path = write_plan(root, control_only(
        script_cmd("resumable.py", "--steps", "100000", "--sleep", "0.05"), minutes=30))
    with_engine(path, f'preemption = "{metadata.base}/notice"\nshutdown_grace_seconds = 60')
    result: dict = {}

    def headless():
        result["out"] = run_cli("run", "--headless", str(path), cwd=root, timeout=300)

    runner = threading.Thread(target=headless)
    runner.start()
    try:
        from enginekit import wait_for

        wait_for(lambda: training(root), 120, "a run training")
        metadata.posted = "reclaimed in 2 minutes"
        runner.join(300)
    finally:
        end_engine(root)  # whatever happened: the headless engine and its runs, by pid
        runner.join(30)
    out = result["out"]
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "the box is going down" in out.stdout
    # no [store] here: what it says continues the campaign is true for this plan
    assert "`itera-tui` here after a reboot (not on a new box: without [store]" in out.stdout
    assert "resume" not in out.stdout.split("the box is going down", 1)[1]
    shown = cli("status", str(path), cwd=root)
    assert "the box announced its end (preemption notice): continue with `itera-tui` here" \
        in shown.stdout, shown.stdout
    events = read_ledger(root / ".itera/ledger.jsonl")
    (down,) = [e for e in events if e["event"] == "box_going_down"]
    assert down["signal"] == "preemption notice"
    assert down["notice"] == "preemption notice: reclaimed in 2 minutes"
    (kept,) = [e for e in events if e["event"] == "box_checkpointed"]
    state = replay(events)
    (run,) = [r for r in state.runs if r.kind == "run"]
    assert kept["saved"].get(run.id), kept  # a verified checkpoint, asked after the notice
    stops = [e for e in events if e["event"] == "run_stop_requested" and e["run"] == run.id]
    assert stops and stops[0]["by"] == "box_going_down"  # the engine ended it, not the box
    assert run.state == "cut" and not run.alive
    assert not [e for e in events if e["event"] == "engine_restarted"]


def test_what_continues_a_campaign_after_its_box_is_true_for_its_plan():
    from types import SimpleNamespace

    from tui.engine.moves import how_to_continue

    lot = SimpleNamespace(gpu="RTX 4090", hours=72.0, price_usd=47.14, gpus=1)
    stored = SimpleNamespace(store=SimpleNamespace(url="s3://camp/team", options=()),
                             lots=(lot,))  # no state_dir: what it stored is not asked
    assert how_to_continue(stored).startswith(
        "`itera-tui resume s3://camp/team DIR --lot 'gpu = \"RTX 4090\", days = 3, "
        "price_usd = 47.14'` on a new box")
    far = SimpleNamespace(store=SimpleNamespace(url="s3://camp/team",
                                                options=(("endpoint_url", "http://s:9"),)),
                          lots=(lot,))
    assert how_to_continue(far).startswith(
        "`ITERA_STORE_ENDPOINT=http://s:9 itera-tui resume s3://camp/team DIR")
    assert "not on a new box" in how_to_continue(SimpleNamespace(store=None))


class Hostile(Served):
    """A TCP server on 127.0.0.1 that answers its first requests, one each, with the
    hostile answers given (raw bytes, or DRIP: a status line sent a byte every 0.8 s for
    as long as the client stays), and every later request as `honest(method, path)`
    does. Ended in `close`, dripping answers included."""

    DRIP = b"HTTP/1.1 200 OK\r\nContent-Length: 4000\r\n\r\n" + b"x" * 4000

    def __init__(self, answers: list, honest):
        import socketserver

        self.answers, self.honest = list(answers), honest
        self.served: list[str] = []  # what each request was answered with
        self.stop = threading.Event()
        hostile = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                head = b""
                self.request.settimeout(5)
                while b"\r\n\r\n" not in head and len(head) < 65536:
                    chunk = self.request.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                method, path = head.split(b" ", 2)[:2]
                answer = hostile.answers.pop(0) if hostile.answers else None
                try:
                    if answer is None:
                        hostile.served.append("honest")
                        self.request.sendall(hostile.honest(method.decode(), path.decode()))
                    elif answer == "drip":
                        hostile.served.append("drip")
                        for byte in hostile.DRIP:
                            if hostile.stop.is_set():
                                return
                            self.request.sendall(bytes([byte]))
                            hostile.stop.wait(0.8)
                    else:
                        hostile.served.append("hostile")
                        self.request.sendall(answer)
                except OSError:
                    return  # the client gave up on it: what the deadline is for

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.serve(Handler, Server)

    def close(self):
        self.stop.set()  # a dripping answer ends at its next byte
        super().close()


def http_answer(status: int, body: bytes = b"", headers: int = 0) -> bytes:
    extra = b"".join(b"X-Pad-%d: p\r\n" % i for i in range(headers))
    return (b"HTTP/1.1 %d X\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n"
            % (status, len(body), extra)) + body


def watched(source_reader, hostile: Hostile, what: str):
    """A watch polling fast until it calls back; its notice, its lines, its thread."""
    from enginekit import wait_for

    seen, lines = [], []
    watch = preemption.PreemptionWatch("hostile", seen.append, lines.append, poll_s=0.01,
                                       reader=source_reader).start()
    try:
        wait_for(lambda: seen, 60, what)
        watch._thread.join(10)
        return seen, lines, watch
    finally:
        watch.close()


HOSTILE = [http_answer(200, b"going", headers=150),  # http.client: > 100 headers
           b"\x00\xffnot http at all\r\n\r\n",  # BadStatusLine
           "drip",  # a byte every 0.8 s: only a deadline on the whole request ends it
           b"",  # closed without a word
           http_answer(500, b"{" * 100000),
           b"HTTP/1.1 200 OK\r\n" + b"X: " + b"a" * 70000 + b"\r\n\r\n"]  # a line too long


def test_the_watch_outlives_every_hostile_answer_and_then_reads_the_real_notice():
    def honest(method, path):
        return http_answer(200, b"reclaimed in 2 minutes") if path == "/notice" else \
            http_answer(404)

    server = Hostile(HOSTILE, honest)
    try:
        seen, lines, watch = watched(lambda: preemption.read_url(server.base + "/notice"),
                                     server, "the real notice after the hostile ones")
    finally:
        server.close()
    assert server.served[:len(HOSTILE)] == ["hostile"] * 2 + ["drip"] + ["hostile"] * 3
    assert server.served[len(HOSTILE):] == ["honest"]
    assert [n.text for n in seen] == ["preemption notice: reclaimed in 2 minutes"]
    assert len(lines) == 1 and "cannot be read" in lines[0]  # said once, then watched on
    assert not watch._thread.is_alive()  # it ends once it has called back, not before


def test_aws_hostile_tokens_and_a_nested_notice_are_survived_and_the_notice_acted_on():
    nested = b"[" * 100000  # RecursionError in json, had it been parsed whole
    answers = []
    for bad in HOSTILE:  # each as the token's answer, then as the instance-action's
        answers += [bad, http_answer(404), http_answer(200, b"token-abc"), bad]
    answers += [http_answer(200, b"token-abc"), http_answer(200, nested)]

    server = Hostile(answers, lambda method, path: http_answer(404))
    try:
        seen, lines, _ = watched(lambda: preemption.read_aws(server.base), server,
                                 "AWS's (unreadable) notice after the hostile answers")
    finally:
        server.close()
    # a 200 on instance-action is AWS's notice; its words are not shown when unreadable
    assert [n.text for n in seen] == ["AWS spot instance-action: an unreadable notice"]
    assert len(lines) == 1 and "cannot be read" in lines[0]


def test_a_notice_of_brackets_is_acted_on_without_showing_them(metadata):
    metadata.posted = "[" * 10000
    notice = preemption.read_url(metadata.base + "/notice")
    assert notice.text == "preemption notice: an unreadable notice"
    metadata.posted = "reclaimed " + "soon " * 1000  # words, but never a flood of them
    assert len(preemption.read_url(metadata.base + "/notice").text) < 250


class ScheduledEvents(Served):
    """An HTTP server on 127.0.0.1 answering as Azure's Scheduled Events do: the events
    document only with `Metadata: true`, this VM's name at the instance metadata, and
    StartRequests taken by POST (kept in `started`, with `then()`'s view of the world at
    that moment). Ended in `close`."""

    def __init__(self, name: str = "vm-camp", at_start=lambda: None):
        self.events: list[dict] = []
        self.started: list[tuple[str, object]] = []  # (EventId, at_start() then)
        self.gets = 0
        events = self

        class Handler(Answering):
            def do_GET(self):  # noqa: N802
                if self.headers.get("Metadata") != "true":
                    return self._answer(400, '{"error": "Bad request"}')
                if self.path == "/metadata/scheduledevents?api-version=2020-07-01":
                    events.gets += 1
                    return self._answer(200, json.dumps({"DocumentIncarnation": len(
                        events.events), "Events": events.events}))
                if self.path.startswith("/metadata/instance/compute/name?"):
                    return self._answer(200, name)
                self._answer(404)

            def do_POST(self):  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                if self.headers.get("Metadata") != "true" or \
                        self.path != "/metadata/scheduledevents?api-version=2020-07-01":
                    return self._answer(400)
                for request in body.get("StartRequests", []):
                    events.started.append((request.get("EventId"), at_start()))
                self._answer(200)

        self.serve(Handler)

    @staticmethod
    def event(kind: str, event_id: str, resources=("vm-camp",)) -> dict:
        return {"EventId": event_id, "EventType": kind, "ResourceType": "VirtualMachine",
                "Resources": list(resources), "EventStatus": "Scheduled",
                "NotBefore": "Fri, 04 Dec 2026 06:30:00 GMT", "Description": "",
                "EventSource": "Platform", "DurationInSeconds": -1}


def test_azure_preempt_for_this_vm_is_the_notice_and_is_acknowledged_only_when_told():
    server = ScheduledEvents()
    try:
        read = preemption.AzureEvents(server.base)
        assert read() is None  # no event
        server.events = [ScheduledEvents.event("Preempt", "other-vm", ["vm-else"]),
                         ScheduledEvents.event("Freeze", "a-pause")]
        assert read() is None  # another VM's end, and a pause, are not this box's end
        server.events.append(ScheduledEvents.event("Preempt", "EV-1"))
        notice = read()
        assert notice.source == "azure"
        assert notice.text == ("Azure Scheduled Event: Preempt not before "
                               "Fri, 04 Dec 2026 06:30:00 GMT")
        assert server.started == []  # read, never acknowledged by reading
        said = notice.then()
        assert server.started == [("EV-1", None)] and "acknowledged" in said
        server.events = [ScheduledEvents.event("Terminate", "EV-2", [])]
        assert read().text.startswith("Azure Scheduled Event: Terminate")
        # an availability set's document, longer than a notice's body: read whole
        server.events = [ScheduledEvents.event("Reboot", f"ev-{i}", [f"vm-{i}"])
                         for i in range(40)] + [ScheduledEvents.event("Preempt", "EV-3")]
        assert read().then() and server.started[-1] == ("EV-3", None)
    finally:
        server.close()


@pytest.mark.slow
def test_azure_preempt_mid_run_checkpoints_first_and_acknowledges_after(tmp_path):
    """The engine reads Azure's Preempt from Scheduled Events on 127.0.0.1 (the metadata
    address is the only thing changed, in the headless process itself), the run
    checkpoints and is cut, and StartRequests comes only once `box_checkpointed` is in
    the ledger: the box is let go after its checkpoints, never before."""
    import os
    import subprocess
    import sys

    from conftest import REPO
    from enginekit import wait_for

    root = tmp_path / "camp"
    root.mkdir()
    ledger = root / ".itera/ledger.jsonl"

    def kept_by_then():
        return [e["event"] for e in read_ledger(ledger) if e["event"] == "box_checkpointed"]

    server = ScheduledEvents(at_start=kept_by_then)
    path = write_plan(root, control_only(
        script_cmd("resumable.py", "--steps", "100000", "--sleep", "0.05"), minutes=30))
    with_engine(path, 'preemption = "azure"\nshutdown_grace_seconds = 60')
    wrapper = ("import sys; import tui.service.preemption as p; p.AZURE_BASE = sys.argv[1]; "
               "from tui.cli import main; sys.exit(main(sys.argv[2:]))")
    env = dict(os.environ, PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out_path = tmp_path / "headless.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen([sys.executable, "-c", wrapper, server.base, "run",
                                 "--headless", str(path)], cwd=root, env=env, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: training(root), 120, "a run training")
        assert server.gets > 0 and server.started == []  # polled; nothing to acknowledge
        server.events = [ScheduledEvents.event("Preempt", "EV-spot-1")]
        proc.wait(300)
    finally:
        if proc.poll() is None:
            proc.kill()  # ours, by its pid
            proc.wait(30)
        end_engine(root)  # the runs the ledger names, by pid
        server.close()
    said = out_path.read_text()
    assert proc.returncode == 0, said[-3000:]
    assert server.started == [("EV-spot-1", ["box_checkpointed"])], said[-3000:]
    assert "acknowledged" in said
    events = read_ledger(ledger)
    (down,) = [e for e in events if e["event"] == "box_going_down"]
    assert down["notice"].startswith("Azure Scheduled Event: Preempt not before")
    (kept,) = [e for e in events if e["event"] == "box_checkpointed"]
    (run,) = [r for r in replay(events).runs if r.kind == "run"]
    assert kept["saved"].get(run.id) and run.state == "cut"
