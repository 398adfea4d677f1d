"""An ssh destination as a renter writes it, split into its parts once.

A lot's `host` is what its renter already types after `ssh`: an alias of their own
~/.ssh/config (`"gpu2"`), or the line a rental page shows
(`"root@203.0.113.7 -p 40022"`). Parsed here, refused in words when unreadable, so
every ssh and rsync call (tui.remote.ssh) is built from the same parts. It lives
in the campaign layer (stdlib only) because the plan loader checks a lot's `host`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass


class DestinationError(ValueError):
    """An ssh destination this module cannot read; the message names what is wrong."""


@dataclass(frozen=True)
class Destination:
    """An ssh destination split into its parts, as the user wrote it in `host`.

    `host` may be an alias of the user's ~/.ssh/config (then user and port come from
    there); `options` are the few ssh flags a renter's line carries (`-i key`,
    `-J jump`, `-o Name=value`), passed through as they are."""

    text: str
    host: str
    user: str | None = None
    port: int | None = None
    options: tuple[str, ...] = ()

    @property
    def target(self) -> str:
        """The `[user@]host` ssh and rsync are given."""
        return f"{self.user}@{self.host}" if self.user else self.host

    @property
    def label(self) -> str:
        """How the destination reads in a line for the user (no options)."""
        port = f" -p {self.port}" if self.port else ""
        return f"{self.target}{port}"

    def connection_args(self) -> tuple[str, ...]:
        """The flags of this destination itself (port and pass-through options)."""
        port = ("-p", str(self.port)) if self.port else ()
        return (*port, *self.options)


_FLAGS_WITH_VALUE = {"-p": "port", "-l": "user", "-i": "option", "-J": "option",
                     "-o": "option", "-F": "option"}


def parse_destination(text: str) -> Destination:
    """`"gpu2"`, `"root@203.0.113.7 -p 40022"`, `"ssh://root@host:40022"` into parts.

    Raises DestinationError with a message naming what could not be read."""
    if not isinstance(text, str) or not text.strip():
        raise DestinationError("an ssh destination is needed, e.g. \"gpu2\" or "
                               "\"root@203.0.113.7 -p 40022\"")
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise DestinationError(f"cannot read {text!r}: {exc}") from None
    if words and words[0] == "ssh":
        words = words[1:]  # a line pasted with its command
    host_word: str | None = None
    user: str | None = None
    port: int | None = None
    options: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("-") and len(word) >= 2:
            flag, glued = word[:2], word[2:]
            if flag not in _FLAGS_WITH_VALUE:
                raise DestinationError(f"{text!r}: the ssh flag {word} is not taken here; "
                                       "put it in ~/.ssh/config under a Host alias")
            if glued:
                value = glued
            elif i + 1 < len(words):
                i += 1
                value = words[i]
            else:
                raise DestinationError(f"{text!r}: {flag} needs a value")
            kind = _FLAGS_WITH_VALUE[flag]
            if kind == "port":
                port = _port(value, text)
            elif kind == "user":
                user = value
            else:
                options += [flag, value]
        elif host_word is None:
            host_word = word
        else:
            raise DestinationError(f"{text!r}: more than one host ({host_word!r}, {word!r}); "
                                   "a lot is one box")
        i += 1
    if host_word is None:
        raise DestinationError(f"{text!r}: no host in it")
    if host_word.startswith("ssh://"):
        rest = host_word[len("ssh://"):].rstrip("/")
        if "@" in rest:
            user, rest = rest.rsplit("@", 1)
        if rest.count(":") == 1:
            rest, port_text = rest.split(":")
            port = _port(port_text, text)
        host_word = rest
    elif "@" in host_word:
        user, host_word = host_word.rsplit("@", 1)
    if not host_word or any(c in host_word for c in "/ \t") or host_word.startswith("-"):
        raise DestinationError(f"{text!r}: {host_word!r} is not a host name")
    if user is not None and (not user or user.startswith("-")):
        raise DestinationError(f"{text!r}: {user!r} is not a user name")
    return Destination(text=text, host=host_word, user=user, port=port,
                       options=tuple(options))


def _port(value: str, text: str) -> int:
    if not value.isdigit() or not 0 < int(value) < 65536:
        raise DestinationError(f"{text!r}: {value!r} is not a port (1-65535)")
    return int(value)
