"""Where notices go and how one is delivered: the addresses, and Apprise.

The addresses come from `[notify] urls`, an environment variable
(`urls_env`) or a file outside the campaign folder (`urls_file`), read when
the engine starts; an address already redacted (`.itera/plan.toml` keeps only
that form) is skipped with a reason, never sent to. Apprise is imported here
and only when something is sent, so a campaign without `[notify]` never
loads it. Its log goes to a capture, never to the terminal: the reason a
delivery failed is read from it and scrubbed of every secret piece of the
address before anyone sees it.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ..campaign.notify_plan import REDACTED, NotifyPlan, redact_url, scrub

REASON_MAX = 300


@dataclass(frozen=True)
class Addresses:
    """The addresses a campaign's notices go to, and why some could not be used."""

    urls: tuple[str, ...]  # secrets: only `shown` ever leaves this process
    problems: tuple[str, ...] = ()

    @property
    def shown(self) -> tuple[str, ...]:
        return tuple(redact_url(u) for u in self.urls)


def _split_addresses(text: str) -> list[str]:
    """Addresses separated by spaces or new lines; a line starting with `#` is a comment."""
    return [part for line in text.splitlines() if not line.lstrip().startswith("#")
            for part in line.split()]


def resolve_addresses(notify: NotifyPlan, environ=os.environ) -> Addresses:
    """Every address from every source `[notify]` names, in order, without repeats."""
    urls, problems = list(notify.urls), []
    if notify.urls_env:
        value = environ.get(notify.urls_env)
        if value:
            urls += _split_addresses(value)
        else:
            problems.append(f"${notify.urls_env} is not set: no address from it")
    if notify.urls_file:
        path = Path(notify.urls_file).expanduser()
        try:
            urls += _split_addresses(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(f"urls_file {notify.urls_file}: cannot read it "
                            f"({getattr(exc, 'strerror', None) or type(exc).__name__})")
    usable = []
    for url in dict.fromkeys(urls):
        if REDACTED in url:
            problems.append(f"{redact_url(url)} is a redacted address (the frozen plan keeps "
                            "no token): give the real one in campaign.toml, urls_env or "
                            "urls_file")
        else:
            usable.append(url)
    return Addresses(tuple(usable), tuple(problems))


@dataclass(frozen=True)
class Delivery:
    """One attempt at one address: delivered, or why not (secrets scrubbed)."""

    ok: bool
    reason: str


def _quiet_apprise_log() -> None:
    """Apprise logs failures as warnings; with no handler Python would print them to
    stderr (a token in a URL included): they go to our capture only."""
    log = logging.getLogger("apprise")
    if not any(isinstance(h, logging.NullHandler) for h in log.handlers):
        log.addHandler(logging.NullHandler())
    log.propagate = False


def deliver(url: str, title: str, body: str) -> Delivery:
    """Send one notice to one address with Apprise (its timeouts: the URL's `cto`/`rto`)."""
    try:
        import apprise
    except ImportError:
        return Delivery(False, "Apprise is not installed (pip install 'itera-tui[notify]')")
    _quiet_apprise_log()
    sender = apprise.Apprise()
    with apprise.LogCapture(level=logging.WARNING, fmt="%(message)s") as log:
        if not sender.add(url):
            return Delivery(False, "not an address Apprise can use (unknown scheme or a "
                                   "malformed URL)")
        try:
            ok = bool(sender.notify(body=body, title=title))
        except Exception as exc:  # a plugin's bug is a lost notice, never a crash
            return Delivery(False, _clean(f"{type(exc).__name__}: {exc}", url))
        said = log.getvalue()
    if ok:
        return Delivery(True, "delivered")
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    return Delivery(False, _clean(lines[-1] if lines else "Apprise reported a failure", url))


def _clean(text: str, url: str) -> str:
    text = "".join(ch if ch.isprintable() else " " for ch in scrub(text, [url]))
    return text if len(text) <= REASON_MAX else text[:REASON_MAX - 1] + "…"
