"""`[notify]`: who is told what, and how the secrets in the addresses are kept hidden.

A notice address is an Apprise URL (`ntfy://`, `slack://`, `tgram://`,
`json://`, `mailto://`, ...), and most of them carry a token: whoever reads it
can post to the person's phone. So an address is never shown or written as
given: `redact_url` keeps the scheme and a host name (when it reads like one,
not like a token) and hides the rest; the frozen plan, the ledger, the
bundle, the report and every screen only ever hold that form. The addresses
may also stay out of the campaign file altogether: an environment variable
(`urls_env`) or a file outside the campaign folder (`urls_file`), read when
the engine starts. Stdlib only: the engine redacts the frozen plan with it.
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass
from pathlib import Path

from .validate import Reader, describe

REDACTED = "***"


class NoticeKind(str, enum.Enum):
    """What a notice is about; the value is the name `[notify] on` uses."""

    STOP = "stop"                    # a stop rule fired
    FAILED = "failed"                # a run failed (exited badly, or could not start)
    DECISION = "decision"            # the decision point waits for a person
    DEADLINE = "deadline"            # the engine took the default at the deadline
    CHECKPOINT = "checkpoint"        # a checkpoint failed verification
    GPU = "gpu"                      # a GPU lost, or idle under a live run
    WINDOW = "window"                # the rental window ends soon with work left
    RESTART = "restart"              # the engine restarted after a crash
    WRAPUP = "wrapup"                # the bundle is built: verdict, cost, size, fetch command
    WRAPUP_FAILED = "wrapup_failed"  # the wrap-up failed or the bundle did not verify
    STORE = "store"                  # the off-box store is unreachable, or delivery at risk
    TEST = "test"                    # `itera-tui notify --test`


KIND_NAMES = tuple(k.value for k in NoticeKind if k is not NoticeKind.TEST)
# what needs a person (the default of `on`): a stop rule doing its job does not
DEFAULT_ON = tuple(k for k in KIND_NAMES if k != NoticeKind.STOP.value)


@dataclass(frozen=True)
class NotifyPlan:
    """`[notify]` resolved: where the addresses come from and what is sent."""

    urls: tuple[str, ...] = ()  # as written in campaign.toml (secrets: never shown)
    urls_env: str | None = None  # an environment variable: addresses, one per line or ","
    urls_file: str | None = None  # a file outside the campaign folder, one address a line
    on: tuple[str, ...] = DEFAULT_ON
    window_lead_minutes: float = 60.0  # "window ending soon" this long before its end
    quiet_minutes: float = 30.0  # the same notice (kind, run) at most once in this time
    attempts: int = 3  # deliveries tried per address before the notice is lost

    def sends(self, kind: NoticeKind) -> bool:
        return kind is NoticeKind.TEST or kind.value in self.on

    @property
    def sources(self) -> str:
        """Where the addresses come from, in words (never the addresses)."""
        parts = [f"{len(self.urls)} in campaign.toml"] if self.urls else []
        if self.urls_env:
            parts.append(f"${self.urls_env}")
        if self.urls_file:
            parts.append(self.urls_file)
        return ", ".join(parts) or "none"


def read_notify(table, root: Path, problems: list[str]) -> NotifyPlan | None:
    if table is None:
        return None
    r = Reader(table, "notify", problems)
    urls = r.get_str_list("urls")
    env = r.get_str("urls_env")
    file = r.get_str("urls_file")
    on = r.get_str_list("on", DEFAULT_ON)
    lead = r.get_number("window_lead_minutes", 60.0, positive=True)
    quiet = r.get_number("quiet_minutes", 30.0, non_negative=True)
    attempts = r.get_int("attempts", 3, minimum=1)
    r.reject_unknown(r.seen)
    for i, url in enumerate(urls):
        if "://" not in url:
            r.problem(f"urls[{i}]", f"{describe(redact_url(url))} is not an Apprise URL "
                      "(scheme://..., e.g. ntfys://ntfy.sh/TOPIC or json://host/path)")
    if env is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", env):
        r.problem("urls_env", f"{describe(env)} is not an environment variable name")
    if file is not None:
        path = Path(file).expanduser()
        if not path.is_absolute():
            r.problem("urls_file", f"{describe(file)}: give a path outside the campaign "
                      "folder (\"~/...\" or absolute), so the tokens never reach the bundle")
        elif _inside(root, path):
            r.problem("urls_file", f"{describe(file)} is inside the campaign folder: keep "
                      "the file of addresses elsewhere (\"~/...\"), so the tokens never "
                      "reach the bundle or a repository")
    for i, name in enumerate(on):
        if name not in KIND_NAMES:
            from .validate import did_you_mean

            r.problem(f"on[{i}]", f"unknown kind {describe(name)}{did_you_mean(name, KIND_NAMES)}"
                      f"; kinds: {', '.join(KIND_NAMES)}")
    if not (urls or env or file):
        r.problem("", "needs urls, urls_env or urls_file (where the notices go)")
    return NotifyPlan(urls=urls, urls_env=env, urls_file=file, on=on,
                      window_lead_minutes=lead or 60.0,
                      quiet_minutes=30.0 if quiet is None else quiet, attempts=attempts or 3)


def _inside(folder: Path, path: Path) -> bool:
    try:
        path.resolve().relative_to(Path(folder).resolve())
        return True
    except ValueError:
        return False


_HOST = re.compile(r"(localhost|[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?")


def _split(url: str) -> tuple[str, str, str, str]:
    """(scheme, userinfo, host, rest) of `scheme://userinfo@host/rest?query`."""
    scheme, _, rest = url.partition("://")
    cut = min([i for i in (rest.find("/"), rest.find("?")) if i >= 0] or [len(rest)])
    authority, tail = rest[:cut], rest[cut:]
    userinfo, at, host = authority.rpartition("@")
    return scheme, userinfo if at else "", host, tail


def redact_url(url: str) -> str:
    """The address as it may be shown: the scheme, a host that reads like a host name,
    and `***` for everything else (user, password, path, query: where tokens live)."""
    if not isinstance(url, str) or "://" not in url:
        return REDACTED
    scheme, userinfo, host, tail = _split(url)
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return REDACTED
    shown = host if _HOST.fullmatch(host) else REDACTED
    if userinfo:
        shown = f"{REDACTED}@{shown}"
    hidden = tail.strip("/?") != ""
    return f"{scheme}://{shown}" + (f"/{REDACTED}" if hidden else "")


def secret_parts(url: str) -> list[str]:
    """The pieces of `url` that `redact_url` hides, longest first (to scrub a text that
    may quote them, e.g. a library's error message)."""
    if not isinstance(url, str):
        return []
    scheme, userinfo, host, tail = _split(url)
    parts = [url, url.partition("://")[2]]
    parts += re.split(r"[:@]", userinfo) if userinfo else []
    if not _HOST.fullmatch(host):
        parts += re.split(r"[:]", host)
    parts += re.split(r"[/?&=#]", tail)
    parts = {p for p in parts if len(p) >= 3 and p != REDACTED}
    return sorted(parts, key=len, reverse=True)


def token_parts(urls) -> list[str]:
    """The pieces of `urls` that read like tokens (8+ characters with a digit, or 16+):
    what the bundle's text files must never hold (a git diff of campaign.toml, a log),
    without rewriting ordinary words that happen to be a path segment."""
    parts = {p for url in urls for p in secret_parts(url)
             if (len(p) >= 8 and any(c.isdigit() for c in p)) or len(p) >= 16}
    return sorted(parts, key=len, reverse=True)


def scrub(text: str, urls) -> str:
    """`text` with every secret piece of `urls` replaced by `***`."""
    for url in urls:
        for part in secret_parts(url):
            text = text.replace(part, REDACTED)
    return text


def redacted_raw(raw: dict) -> dict:
    """The campaign as written, with `[notify] urls` redacted: what the frozen plan keeps
    (the campaign file itself stays the user's; `.itera/` and the bundle never hold a
    token)."""
    notify = raw.get("notify")
    if not isinstance(notify, dict) or not isinstance(notify.get("urls"), list):
        return raw
    out = dict(raw)
    out["notify"] = dict(notify, urls=[redact_url(u) for u in notify["urls"]])
    return out
