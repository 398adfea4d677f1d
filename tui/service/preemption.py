"""A provider's preemption notice, read where the box offers one.

A spot or preemptible box is taken with a short warning: AWS posts a spot
`instance-action` in the instance metadata two minutes ahead, Google Cloud sets
`instance/preempted` about thirty seconds ahead, Azure schedules a Preempt event
at least thirty seconds ahead, and some rental hosts expose a URL of their own.
A SIGTERM from the system comes later, or not at all before the power goes. So
with `[engine] preemption` the engine process polls that notice on a thread of
its own (never on the engine's loop; one short HTTP request every POLL_S, all of
it, however the answer drips, within TIMEOUT_S and ANSWER_MAX bytes, no proxy:
the metadata address is link-local) and, the first time it reads one, does what
the system's SIGTERM does: `box_going_down` with the notice's words, a
checkpoint asked of every live run, then the runs are ended once their
checkpoints are in (they are *cut*, and `itera-tui resume URL` continues them
on the next box).

`preemption` is `"aws"` (IMDSv2, with a token; IMDSv1 where no token is given),
`"gcp"` (the `Metadata-Flavor: Google` header), `"azure"` (Scheduled Events, a
Preempt or a Terminate, acknowledged only once the checkpoints are in:
`AzureEvents`), or an `http(s)://` URL that answers 404 (or an empty body,
`false`) until the box is to go, and 200 with a line saying so then. An address
that does not answer, or answers with anything but HTTP a parser takes within
the deadline, is no notice: the watch goes on polling, and says once that it
cannot read it. A notice whose words do not read as words is acted on as "an
unreadable notice".
"""

from __future__ import annotations

import http.client
import io
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Callable

from ..campaign.loading.load import PREEMPTION_POLL_S as POLL_S, preemption_source

TIMEOUT_S = 1.0
BODY_MAX = 4096  # of a notice's body, read at most
ANSWER_MAX = 64 * 1024  # of a whole answer, headers included, read at most
WORDS_MAX = 200  # of a notice's words, shown and kept
UNREADABLE = "an unreadable notice"
AWS_BASE = "http://169.254.169.254"
GCP_BASE = "http://metadata.google.internal"
AZURE_BASE = "http://169.254.169.254"
AZURE_EVENTS = "/metadata/scheduledevents?api-version=2020-07-01"
AZURE_NAME = "/metadata/instance/compute/name?api-version=2021-02-01&format=text"
AZURE_ENDS = ("Preempt", "Terminate")  # the event types that take the box away
NO_NOTICE = ("", "false", "0", "no", "none")


@dataclass(frozen=True)
class Notice:
    """A notice read: the provider's words, short and printable."""

    source: str  # "aws", "gcp", "azure" or "url"
    text: str
    # what tells the provider the box may go now (Azure's StartRequests), called by the
    # service once the checkpoints are in; it returns what it did, in words
    then: Callable[[], str] | None = field(default=None, compare=False, repr=False)


class _Deadline:
    """A connected socket whose reads and writes all share one deadline and one cap on
    bytes read: a socket timeout bounds each read, so an answer that drips a byte a
    second would hold the watch for as long as it likes (and a notice the box's end
    depends on would go unread meanwhile)."""

    def __init__(self, sock, deadline: float):
        self.sock, self.deadline, self.read_bytes = sock, deadline, 0
        self._users = 1  # the connection, and each file made (as a socket's makefile)

    def _arm(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the answer took longer than the watch allows")
        self.sock.settimeout(left)

    def sendall(self, data) -> None:
        self._arm()
        self.sock.sendall(data)

    def readinto(self, buffer) -> int:
        if self.read_bytes >= ANSWER_MAX:
            raise ValueError(f"an answer of more than {ANSWER_MAX} bytes")
        self._arm()
        n = self.sock.recv_into(memoryview(buffer)[:ANSWER_MAX - self.read_bytes])
        self.read_bytes += n
        return n

    def makefile(self, mode: str = "rb", *args, **kwargs):
        self._users += 1  # http.client closes the connection before the answer is read
        return io.BufferedReader(_Raw(self))

    def close(self) -> None:
        self._users -= 1
        if self._users <= 0:
            self.sock.close()


class _Raw(io.RawIOBase):
    def __init__(self, owner: _Deadline):
        self.owner = owner

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        return self.owner.readinto(buffer)

    def close(self) -> None:
        if not self.closed:
            self.owner.close()
        super().close()


def _connection(url: str, deadline: float) -> tuple[http.client.HTTPConnection, str]:
    """A connection to `url`'s host (no proxy: the metadata address is link-local) whose
    request and answer end by `deadline` (the connect, and a TLS handshake, each within
    what is left of it); and the path to ask."""
    parts = urllib.parse.urlsplit(url)
    base = http.client.HTTPSConnection if parts.scheme == "https" else \
        http.client.HTTPConnection

    class Connection(base):
        def connect(self) -> None:
            super().connect()  # the connect itself is bounded by `timeout`
            self.sock = _Deadline(self.sock, deadline)

    left = max(0.001, deadline - time.monotonic())
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return Connection(parts.hostname or "", parts.port, timeout=left), path


def _get(url: str, headers: dict | None = None, method: str = "GET",
         body: bytes | None = None, limit: int = BODY_MAX) -> tuple[int, str]:
    """(status, body) of one request, all of it within TIMEOUT_S and ANSWER_MAX bytes;
    404 and the like are answers, not errors. Anything else (no answer, a malformed or
    endless one) raises, and the watch calls that unreadable."""
    connection, path = _connection(url, time.monotonic() + TIMEOUT_S)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        data = response.read(limit) if response.status == 200 else b""
        return response.status, data.decode("utf-8", "replace")
    finally:
        connection.close()


def _printable(text: str) -> str:
    """A notice's words as shown and kept: one line, no control, at most WORDS_MAX
    characters, and only if they read as words: an answer of brackets or bytes is
    "an unreadable notice", never shown as what the provider said."""
    from ..campaign.text import for_terminal

    text = " ".join(str(text).split())
    wordy = sum(c.isalnum() or c.isspace() for c in text)
    if sum(c.isalpha() for c in text) < 2 or wordy * 2 < len(text):
        return UNREADABLE
    shown = for_terminal(text)
    return shown if len(shown) <= WORDS_MAX else shown[:WORDS_MAX - 1] + "…"


def read_aws(base: str = AWS_BASE) -> Notice | None:
    """The spot instance-action, if AWS has scheduled one (IMDSv2 token first)."""
    headers = {}
    try:
        status, token = _get(f"{base}/latest/api/token", method="PUT",
                             headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"})
        if status == 200 and token:
            headers["X-aws-ec2-metadata-token"] = token.strip()
    except (OSError, ValueError, http.client.HTTPException):
        pass  # IMDSv1 only: the plain GET below still answers
    status, body = _get(f"{base}/latest/meta-data/spot/instance-action", headers)
    if status != 200 or not body.strip():
        return None
    # a 200 is the notice, whatever its body; the body only gives its words
    action = _json(body)
    if isinstance(action, dict):
        words = _printable(f"{action.get('action', 'interruption')} at "
                           f"{action.get('time', '?')}")
        if words != UNREADABLE:
            return Notice("aws", f"AWS spot {words}")
    return Notice("aws", "AWS spot instance-action: " + _printable(body))


def _json(body: str):
    """`body` parsed, or None: deep nesting (RecursionError) is as unreadable as garbage."""
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def read_gcp(base: str = GCP_BASE) -> Notice | None:
    """Whether Google Cloud has begun preempting this instance."""
    status, body = _get(f"{base}/computeMetadata/v1/instance/preempted",
                        {"Metadata-Flavor": "Google"})
    if status == 200 and body.strip().upper() == "TRUE":
        return Notice("gcp", "Google Cloud preempts this instance")
    return None


class AzureEvents:
    """Azure's Scheduled Events: a Preempt (a spot VM, at least 30 s ahead) or a
    Terminate among this VM's events is the notice; acknowledging it (StartRequests with
    its EventId) lets Azure go on at once, so that is done only once the checkpoints are
    in (`Notice.then`), never on reading it. The events of a VM name its name among
    their Resources; the name is read once from the instance metadata (unread, every
    event is taken for this VM's: a checkpoint too many costs less than one too few).
    Azure enables the service on the first request, which may answer late: the watch
    says once that it cannot read it, and its next polls read it."""

    def __init__(self, base: str | None = None):
        self.base = base or AZURE_BASE
        self.headers = {"Metadata": "true"}
        self._name: str | None = None

    def vm_name(self) -> str | None:
        if self._name is None:
            try:
                status, body = _get(self.base + AZURE_NAME, self.headers)
                if status == 200 and body.strip():
                    self._name = body.strip()[:WORDS_MAX]
            except Exception:  # noqa: BLE001 - unread: every event counts
                return None
        return self._name

    def __call__(self) -> Notice | None:
        # a document of many events is longer than a notice: read it whole, or not at all
        status, body = _get(self.base + AZURE_EVENTS, self.headers, limit=ANSWER_MAX)
        answer = _json(body) if status == 200 else None
        events = answer.get("Events") if isinstance(answer, dict) else None
        for event in events if isinstance(events, list) else []:
            if not isinstance(event, dict) or event.get("EventType") not in AZURE_ENDS:
                continue
            resources = event.get("Resources")
            name = self.vm_name() if resources else None
            if name is not None and isinstance(resources, list) and name not in resources:
                continue  # another VM's (an availability set shares the document)
            event_id = event.get("EventId")
            words = _printable(f"{event['EventType']} not before "
                               f"{event.get('NotBefore') or 'a time not given'}")
            then = (lambda eid=event_id: self.acknowledge(eid)) \
                if isinstance(event_id, str) and event_id else None
            return Notice("azure", f"Azure Scheduled Event: {words}", then)
        return None

    def acknowledge(self, event_id: str) -> str:
        """StartRequests for `event_id`: Azure may go on with it now."""
        body = json.dumps({"StartRequests": [{"EventId": event_id}]}).encode()
        status, _ = _get(self.base + AZURE_EVENTS, self.headers | {
            "Content-Type": "application/json"}, method="POST", body=body)
        if status != 200:
            return (f"Azure did not take the acknowledgement (HTTP {status}); it takes the "
                    "box at the event's time")
        return "Azure is told the box may go now (its Scheduled Event acknowledged)"


def read_url(url: str) -> Notice | None:
    """A host's own notice URL: 200 with words once the box is to go."""
    status, body = _get(url)
    if status != 200 or body.strip().lower() in NO_NOTICE:
        return None
    return Notice("url", "preemption notice: " + _printable(body))


def reader_for(source: str) -> Callable[[], Notice | None]:
    if source == "aws":
        return read_aws
    if source == "gcp":
        return read_gcp
    if source == "azure":
        return AzureEvents()
    return lambda: read_url(source)


class PreemptionWatch:
    """Polls the notice on its own thread; calls `on_notice` once, with its words."""

    def __init__(self, source: str, on_notice: Callable[[Notice], None],
                 on_line: Callable[[str], None] = lambda line: None, poll_s: float = POLL_S,
                 reader: Callable[[], Notice | None] | None = None):
        self.source = source
        self.on_notice = on_notice
        self.on_line = on_line
        self.poll_s = poll_s
        self.read = reader or reader_for(source)
        self._stop = threading.Event()
        self._said_unreadable = False
        self.notice: Notice | None = None
        self._thread = threading.Thread(target=self._run, name="itera-preemption",
                                        daemon=True)

    def start(self) -> "PreemptionWatch":
        self._thread.start()
        return self

    def close(self) -> None:
        self._stop.set()
        self._thread.join(TIMEOUT_S * 3 + 1)

    def poll_once(self) -> Notice | None:
        try:
            return self.read()
        except Exception as exc:  # noqa: BLE001 - any answer at all (a malformed one,
            # one the stdlib's parser chokes on) is no notice, and the watch goes on
            if not self._said_unreadable:
                self._said_unreadable = True
                self.on_line(f"the preemption notice ({self.source}) cannot be read "
                             f"({type(exc).__name__}); still watching")
            return None

    def _run(self) -> None:
        while not self._stop.is_set():
            notice = self.poll_once()
            if notice is not None:
                self.notice = notice
                self.on_notice(notice)
                return
            self._stop.wait(self.poll_s)


def watch_for(plan, service, on_line: Callable[[str], None]) -> PreemptionWatch | None:
    """The watch a campaign asks for (`[engine] preemption`), started, or None; its
    notice goes to the service as a system SIGTERM would (`box_going_down`)."""
    source = getattr(plan, "preemption", None)
    if not source:
        return None

    def announced(notice: Notice) -> None:
        on_line(f"preemption notice read ({notice.source}): {notice.text}")
        service.box_going_down("preemption notice", notice.text, notice.then)

    on_line(f"watching for a preemption notice ({preemption_source(source)}, every "
            f"{POLL_S:g} s)")
    return PreemptionWatch(source, announced, on_line).start()
