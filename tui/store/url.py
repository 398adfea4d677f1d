"""A store URL opened as an fsspec filesystem, once, off the engine's loop.

`[store] url` is any URL fsspec reads (`s3://bucket/prefix`, `sftp://user@host/path`,
`file:///mnt/volume/x`, `gcs://`, `az://`, `hf://`...), `options` the filesystem's
keyword arguments (`endpoint_url`, `profile`, `region_name`, `client_kwargs`). No
credential ever comes from campaign.toml (the loader refuses every option not known to
hold no secret: `campaign.loading.sections.secret_options`): s3fs/botocore read the environment and
~/.aws profiles, sshfs/asyncssh read ~/.ssh, the others their own usual places.

`Store.label` is how the store is named to a person and in what is kept (the ledger,
the report, a notice): the URL as written less any password and query (both refused
at load; a URL given to `verify`/`fetch`/`resume` is cut the same), never the options.
A store that cannot be reached or read is said by `store_failure`: one sentence naming
the store and what to set (the endpoint, the credentials, the bucket).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from ..campaign.loading.sections import secret_options, shown_url
from ..campaign.plan import StorePlan


class StoreError(Exception):
    """The store cannot be opened or used; the message says why in words."""


@dataclass(frozen=True)
class StoreUrl:
    """A store URL split once: the fsspec protocol and the root path inside it."""

    text: str  # as written, less a password and a query (the label: shown and kept)
    protocol: str  # "s3", "sftp", "file", ...
    root: str  # the path fsspec uses for the prefix ("bucket/prefix", "/mnt/x")

    @classmethod
    def parse(cls, text: str, options: dict | None = None) -> "StoreUrl":
        from fsspec.core import split_protocol
        from fsspec.registry import get_filesystem_class

        text = str(text).strip()
        if not text:
            raise StoreError("no store URL given")
        protocol, _ = split_protocol(text)
        protocol = protocol or "file"
        try:
            fs_class = get_filesystem_class(protocol)
        except (ValueError, ImportError) as exc:
            raise StoreError(f"{text}: fsspec has no filesystem for {protocol!r} here "
                             f"({exc})") from None
        root = fs_class._strip_protocol(text)
        if isinstance(root, list):
            root = root[0]
        return cls(text=shown_url(text).rstrip("/"), protocol=protocol,
                   root=str(root).rstrip("/"))

    def join(self, *parts: str) -> str:
        """The fsspec path of `parts` under the root."""
        tail = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
        if not tail:
            return self.root
        return f"{self.root}/{tail}" if self.root else tail

    def url_of(self, *parts: str) -> str:
        """The full URL of `parts` (what a person pastes into `itera-tui verify`)."""
        tail = "/".join(p.strip("/") for p in parts if p and p.strip("/"))
        return f"{self.text}/{tail}" if tail else self.text


@dataclass(frozen=True, eq=False)
class Store:
    """An opened store: the URL, its options and the fsspec filesystem (made lazily)."""

    url: StoreUrl
    options: tuple[tuple[str, Any], ...] = ()
    _fs: list = field(default_factory=list, repr=False)
    _lock: Any = field(default_factory=threading.Lock, repr=False)

    @property
    def label(self) -> str:
        return self.url.text

    @property
    def fs(self):
        """The fsspec filesystem; opened on first use (a thread's, never the engine loop's)."""
        with self._lock:
            if not self._fs:
                self._fs.append(_open_fs(self.url, dict(self.options)))
            return self._fs[0]

    def path(self, *parts: str) -> str:
        return self.url.join(*parts)


def _open_fs(url: StoreUrl, options: dict):
    import fsspec

    kwargs = dict(options)
    if url.protocol in ("sftp", "ssh"):
        from fsspec.core import url_to_fs

        try:
            fs, _ = url_to_fs(url.text, **kwargs)
        except Exception as exc:
            raise StoreError(f"{url.text}: cannot open: {type(exc).__name__}: {exc}") from None
        return fs
    if url.protocol in ("file", "local"):
        kwargs.setdefault("auto_mkdir", True)
    if url.protocol in ("s3", "s3a"):  # a store that is down fails fast and is retried
        config = dict(kwargs.get("config_kwargs") or {})  # by the mirror, not by botocore
        config.setdefault("connect_timeout", 5)
        config.setdefault("read_timeout", 60)
        config.setdefault("retries", {"max_attempts": 2})
        kwargs["config_kwargs"] = config
        kwargs.setdefault("skip_instance_cache", True)
    try:
        return fsspec.filesystem(url.protocol, **kwargs)
    except Exception as exc:
        raise StoreError(f"{url.text}: cannot open: {type(exc).__name__}: {exc}") from None


def open_store(target: StorePlan | str, options: dict | None = None) -> Store:
    """A `Store` from a plan's `[store]` or a URL (with options); nothing is contacted
    until `.fs` is first used. Options that may hold a secret are refused here too."""
    if isinstance(target, StorePlan):
        text, opts = target.url, target.options_dict
    else:
        text, opts = str(target), dict(options or {})
    bad = secret_options(opts)
    if bad:
        raise StoreError(f"store options {', '.join(bad)} may hold secrets: give "
                         "credentials through the environment, a profile or ~/.ssh")
    return Store(StoreUrl.parse(text, opts), tuple(sorted(opts.items())))


def _store_failures() -> tuple[type[BaseException], ...]:
    """What reaching a store may raise: the OS's errors, and botocore's own (no
    credentials, no endpoint), which are not OSErrors."""
    out: tuple[type[BaseException], ...] = (OSError, ValueError)
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:
        return out
    return out + (BotoCoreError, ClientError)


STORE_FAILURES = _store_failures()

FIX_ENDPOINT = ("for an S3 that is not AWS's, set ITERA_STORE_ENDPOINT=http://HOST:PORT or "
                "pass --option endpoint_url=http://HOST:PORT")


def store_failure(url: str, exc: BaseException, options: dict | None = None,
                  writing: bool = False) -> str:
    """One sentence for a store that cannot be reached, read or (`writing`: `check` and
    a start, claim.py) written: the store as shown (no secret), what failed, and the
    option or setting that fixes it. Never a traceback: `resume`, `verify URL` and
    `fetch URL` print this and exit 2."""
    from ..campaign.loading.sections import without_url_secrets

    shown = shown_url(url)
    name = type(exc).__name__
    text = without_url_secrets(str(exc), url).splitlines()[0] if str(exc) else name
    endpoint = (options or {}).get("endpoint_url")
    s3 = url.partition("://")[0] in ("s3", "s3a")
    if name in ("NoCredentialsError", "PartialCredentialsError", "NoAuthTokenError"):
        return (f"{shown}: no credentials for this S3 store: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE) in the environment")
    if name in ("EndpointConnectionError", "ConnectTimeoutError", "ConnectionClosedError") \
            or isinstance(exc, ConnectionError):
        where = f"its endpoint {endpoint}" if endpoint else "AWS S3 (no endpoint given)"
        return (f"{shown}: the store cannot be reached at {where}: {FIX_ENDPOINT}"
                if s3 else f"{shown}: the store cannot be reached ({text})")
    may = "write to" if writing else "read"
    if isinstance(exc, PermissionError) or "AccessDenied" in text or "Forbidden" in text:
        return (f"{shown}: the store refuses these credentials ({text}): give ones that "
                f"may {may} it (AWS_PROFILE, AWS_ACCESS_KEY_ID)" if s3 else
                f"{shown}: not {'writable' if writing else 'readable'} here ({text}): give "
                "this user that right, or name a folder it may write")
    if isinstance(exc, FileNotFoundError) or "NoSuchBucket" in text:
        return (f"{shown}: not found at {endpoint or 'AWS S3'} (no such bucket or prefix): "
                f"create the bucket, or name the store that has it ({FIX_ENDPOINT})" if s3
                else f"{shown}: no such folder here ({text}): create it (or mount its "
                "volume), or correct the URL")
    fix = f"check the URL and, {FIX_ENDPOINT}" if s3 and not endpoint else "check the URL"
    return (f"{shown}: the store cannot be {'written' if writing else 'read'} ({name}: "
            f"{text}): {fix}")
