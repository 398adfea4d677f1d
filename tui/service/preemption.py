"""A provider's preemption notice, read where the box offers one.

A spot or preemptible box is taken with a short warning: AWS posts a spot
`instance-action` in the instance metadata two minutes ahead, Google Cloud sets
`instance/preempted` about thirty seconds ahead, and some rental hosts expose a
URL of their own. A SIGTERM from the system comes later, or not at all before
the power goes. So with `[engine] preemption` the engine process polls that
notice on a thread of its own (never on the engine's loop; one short HTTP
request every POLL_S, a timeout of TIMEOUT_S, no proxy: the metadata address is
link-local) and, the first time it reads one, does what the system's SIGTERM
does: `box_going_down` with the notice's words, a checkpoint asked of every live
run, then the runs are ended once their checkpoints are in (they are *cut*, and
`itera-tui resume URL` continues them on the next box).

`preemption` is `"aws"` (IMDSv2, with a token; IMDSv1 where no token is given),
`"gcp"` (the `Metadata-Flavor: Google` header), or an `http(s)://` URL that
answers 404 (or an empty body, `false`) until the box is to go, and 200 with a
line saying so then. An address that does not answer is no notice: the watch
goes on polling, and says once that it cannot read it.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

from ..campaign.loading.load import PREEMPTION_POLL_S as POLL_S, preemption_source

TIMEOUT_S = 1.0
BODY_MAX = 4096  # of a notice's answer, read at most
AWS_BASE = "http://169.254.169.254"
GCP_BASE = "http://metadata.google.internal"
NO_NOTICE = ("", "false", "0", "no", "none")


@dataclass(frozen=True)
class Notice:
    """A notice read: the provider's words, short and printable."""

    source: str  # "aws", "gcp" or "url"
    text: str


def _opener():
    return urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str, headers: dict | None = None, method: str = "GET") -> tuple[int, str]:
    """(status, body) of one request; 404 and the like are answers, not errors."""
    request = urllib.request.Request(url, headers=headers or {}, method=method)
    try:
        with _opener().open(request, timeout=TIMEOUT_S) as response:
            return response.status, response.read(BODY_MAX).decode("utf-8", "replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def _printable(text: str) -> str:
    from ..campaign.text import for_terminal

    return for_terminal(" ".join(text.split()))[:200]


def read_aws(base: str = AWS_BASE) -> Notice | None:
    """The spot instance-action, if AWS has scheduled one (IMDSv2 token first)."""
    headers = {}
    try:
        status, token = _get(f"{base}/latest/api/token", method="PUT",
                             headers={"X-aws-ec2-metadata-token-ttl-seconds": "300"})
        if status == 200 and token:
            headers["X-aws-ec2-metadata-token"] = token.strip()
    except (OSError, ValueError):
        pass  # IMDSv1 only: the plain GET below still answers
    status, body = _get(f"{base}/latest/meta-data/spot/instance-action", headers)
    if status != 200 or not body.strip():
        return None
    try:
        action = json.loads(body)
        words = f"AWS spot {action.get('action', 'interruption')} at {action.get('time', '?')}"
    except (ValueError, AttributeError):
        words = f"AWS spot instance-action: {body}"
    return Notice("aws", _printable(words))


def read_gcp(base: str = GCP_BASE) -> Notice | None:
    """Whether Google Cloud has begun preempting this instance."""
    status, body = _get(f"{base}/computeMetadata/v1/instance/preempted",
                        {"Metadata-Flavor": "Google"})
    if status == 200 and body.strip().upper() == "TRUE":
        return Notice("gcp", "Google Cloud preempts this instance")
    return None


def read_url(url: str) -> Notice | None:
    """A host's own notice URL: 200 with words once the box is to go."""
    status, body = _get(url)
    if status != 200 or body.strip().lower() in NO_NOTICE:
        return None
    return Notice("url", _printable(f"preemption notice: {body}"))


def reader_for(source: str) -> Callable[[], Notice | None]:
    if source == "aws":
        return read_aws
    if source == "gcp":
        return read_gcp
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
        except (OSError, ValueError) as exc:
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
        service.box_going_down("preemption notice", notice.text)

    on_line(f"watching for a preemption notice ({preemption_source(source)}, every "
            f"{POLL_S:g} s)")
    return PreemptionWatch(source, announced, on_line).start()
