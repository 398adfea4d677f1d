"""The run-shaped sections of `campaign.toml`: steps, variants, pilot, stop rules,
checkpoints and deliverables.

Split from `load.py` (which reads the campaign, window, lots and corpus and
checks cross-references) so each file stays one screenful of rules; every
reader reports through the same `Reader`, naming the exact key.
"""

from __future__ import annotations

import re
import shlex
from urllib.parse import urlsplit

from ..plan import (CATEGORIES, DEFAULT_BASELINE_RECORDS, DEFAULT_IDLE_PERCENT,
                    GPU_IDLE_MIN_MINUTES, Checkpoint, Deliverables, Pilot, Step, StopRule,
                    StorePlan, Variant)
from ..retry import RetryPolicy, read_retry
from ..validate import Reader, describe

# what the engine takes at the decision deadline: go on, wrap up, or drop the optional
# variants that an announced [[stop]] rule stopped in their pilot (then go on)
DECISION_DEFAULTS = ("continue", "wrapup", "drop-stopped")
STEP_KINDS = ("prepare", "data_check", "resume_check", "wrapup")
RULES = ("non_finite", "threshold", "truncation", "resume", "stall", "diverged", "gpu_idle")
RULE_KEYS = {
    "non_finite": ("metrics",),
    "threshold": ("metric", "below", "above", "from_step"),
    "truncation": ("metric", "max"),
    "resume": ("within_minutes",),
    "stall": ("minutes", "startup_minutes"),
    "diverged": ("metric", "factor", "baseline_records"),
    "gpu_idle": ("below_percent", "minutes"),
}
RULE_LABELS = {"gpu_idle": "GPU idle"}  # a rule whose key reads poorly to a person


def rule_label(rule: str) -> str:
    """How every view (the room, `status`, the report) names a stop rule."""
    return RULE_LABELS.get(rule, rule)


def _command(r: Reader, name: str = "command") -> tuple[str, ...]:
    value = r.raw(name, None)
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as exc:
            r.problem(name, f"cannot split the command string: {exc}")
            return ()
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return tuple(value)
    r.problem(name, f"expected an argv array of strings or a string, got {describe(value)}")
    return ()


def read_step(table, i, problems) -> Step:
    r = Reader(table, f"step[{i}]", problems)
    step_id = _given_id(r, f"step{i}")
    who = r.get_str("who", "machine", choices=("human", "machine"))
    hours = r.duration_hours() or 0.0
    after = r.get_str_list("after")
    command = _command(r)
    kind = r.get_str("kind", "prepare", choices=STEP_KINDS)
    gpus = r.get_int("gpus", 1 if who == "machine" else 0, minimum=0)
    r.reject_unknown(r.seen)
    if who == "human" and command:
        r.problem("command", "a human step has no command")
    return Step(id=step_id, who=who or "machine", hours=hours, after=after, command=command,
                kind=kind or "prepare", gpus=gpus or 0)


def _given_id(r: Reader, fallback: str) -> str:
    """The id as written; an empty one is reported, not silently renamed."""
    value = r.get_str("id", required=True)
    if value == "":
        r.problem("id", "must not be empty")
    return value or fallback


def read_variant(table, i, problems, retry: RetryPolicy | None = None) -> Variant:
    """`retry`: the campaign's `[retry]`, which the variant's own `retry = {...}` keys
    override one by one."""
    r = Reader(table, f"variant[{i}]", problems)
    vid = _given_id(r, f"variant{i}")
    category = r.get_str("category", required=True, choices=CATEGORIES)
    priority = r.get_int("priority", i + 1, minimum=0)
    command = _command(r)
    if not command:
        r.problem("command", "required: the argv that starts this variant's training")
    params = r.get_table("params") or {}
    hours = r.duration_hours() or 0.0
    steps = r.get_int("steps", None, minimum=1)
    gpus = r.get_int("gpus", 1, minimum=1) or 1
    after = r.get_str_list("after")
    own = read_retry(r.raw("retry", None), r.key("retry"), problems, retry)
    r.reject_unknown(r.seen)
    return Variant(id=vid, category=category or "exploratory", priority=priority or 0,
                   command=command, params=tuple(sorted(params.items())), hours=hours,
                   steps=steps, gpus=gpus, after=after, retry=own)


def read_pilot(table, problems) -> Pilot | None:
    if table is None:
        return None
    r = Reader(table, "pilot", problems)
    steps = r.get_int("steps", None, minimum=1)
    minutes = r.get_number("minutes", None, positive=True)
    decide = r.get_str("decide", "ask", choices=("ask", "continue"))
    decision_hours = r.get_number("decision_hours", 0.0, non_negative=True)
    after = r.get_number("decide_after_minutes", None, positive=True)
    default = r.get_str("default", "continue", choices=DECISION_DEFAULTS)
    r.reject_unknown(r.seen)
    if steps is None and minutes is None:
        r.problem("", "needs steps or minutes per variant")
    if after is not None and decide == "continue":
        r.problem("decide_after_minutes", "only with decide = \"ask\" (with \"continue\" "
                  "nobody is waited for)")
    if "default" in r.table and after is None:
        r.problem("default", "needs decide_after_minutes (when the default is taken)")
    return Pilot(steps=steps, hours=None if minutes is None else minutes / 60,
                 decide=decide or "ask", decision_hours=decision_hours or 0.0,
                 decide_after_minutes=after, default=default or "continue")


def read_stop(table, i, problems) -> StopRule:
    r = Reader(table, f"stop[{i}]", problems)
    rule = r.get_str("rule", required=True, choices=RULES)
    variants = r.get_str_list("variants")
    fields: dict = {"rule": rule or "non_finite", "variants": variants}
    if rule == "non_finite":
        fields["metrics"] = r.get_str_list("metrics")  # none: [metrics]' watch (below)
    elif rule == "threshold":
        fields["metric"] = r.get_str("metric", required=True)
        fields["below"] = r.get_number("below", None)
        fields["above"] = r.get_number("above", None)
        fields["from_step"] = r.get_int("from_step", 0, minimum=0) or 0
        if (fields["below"] is None) == (fields["above"] is None):
            r.problem("", "a threshold rule needs exactly one of below or above")
    elif rule == "truncation":
        fields["metric"] = r.get_str("metric", "truncated")
        fields["max"] = r.get_number("max", 0.0, non_negative=True) or 0.0
    elif rule == "resume":
        fields["within_minutes"] = r.get_number("within_minutes", None, positive=True)
    elif rule == "stall":
        fields["minutes"] = r.get_number("minutes", required=True, positive=True)
        fields["startup_minutes"] = r.get_number("startup_minutes", None, positive=True)
    elif rule == "diverged":
        fields["metric"] = r.get_str("metric", "loss")
        fields["factor"] = r.get_number("factor", required=True, positive=True)
        fields["baseline_records"] = r.get_int("baseline_records", DEFAULT_BASELINE_RECORDS,
                                               minimum=1) or DEFAULT_BASELINE_RECORDS
        if fields["factor"] is not None and fields["factor"] <= 1:
            r.problem("factor", f"must be above 1 (got {fields['factor']:g}): the run would "
                      "be stopped at the level it started from")
    elif rule == "gpu_idle":
        fields["minutes"] = r.get_number("minutes", required=True, positive=True)
        fields["below_percent"] = r.get_number("below_percent", DEFAULT_IDLE_PERCENT,
                                               positive=True)
        if fields["minutes"] is not None and fields["minutes"] < GPU_IDLE_MIN_MINUTES:
            r.problem("minutes", f"must be at least {GPU_IDLE_MIN_MINUTES:g} (got "
                      f"{fields['minutes']:g}): a checkpoint write or an evaluation pass "
                      "holds a healthy run's GPUs near 0 % for a minute or two, and a "
                      "shorter window would stop it")
        if fields["below_percent"] is not None and fields["below_percent"] > 100:
            r.problem("below_percent", f"is a utilisation in percent, at most 100 (got "
                      f"{fields['below_percent']:g})")
    r.reject_unknown(("rule", "variants") + RULE_KEYS.get(rule or "", ()))
    return StopRule(**fields)


def read_checkpoint(table, problems) -> Checkpoint:
    r = Reader(table, "checkpoint", problems)
    every = r.raw("every_minutes", None)
    auto = every == "auto"
    if every is not None and not auto:
        every = r.get_number("every_minutes", positive=True)
    tolerable = r.get_number("tolerable_loss_minutes", None, positive=True)
    mtbf = r.get_number("mtbf_hours", 24.0, positive=True) or 24.0
    watch = r.get_relative_globs("watch")
    r.reject_unknown(r.seen)
    return Checkpoint(every_minutes=None if auto else every, auto=auto,
                      tolerable_loss_minutes=tolerable, mtbf_hours=mtbf, watch=watch)


def read_deliverables(table, problems) -> Deliverables:
    r = Reader(table, "deliverables", problems)
    files = r.get_str_list("files")
    unit = r.get_str("unit", "deliverable") or "deliverable"
    r.reject_unknown(r.seen)
    for i, name in enumerate(files):
        parts = name.replace("\\", "/").split("/")
        if name.startswith(("/", "~")) or ".." in parts:
            r.problem(f"files[{i}]", f"{describe(name)} must be relative to the run "
                      "directory (no leading \"/\" or \"~\", no \"..\"): a deliverable "
                      "is what a run writes into its own folder")
    return Deliverables(files=files, unit=unit)


# A store option's value is kept in campaign.toml, which is frozen into .itera/plan.toml,
# the bundle and the store, and shown by `check`: so every option is taken for a secret
# (and refused, in words that say where credentials go: the environment, ~/.aws profiles,
# ~/.ssh, each library's own credentials file) unless it is known to hold none. A name
# alone cannot tell (`x-api-key` in `headers`, an Azure `connection_string`, `pwd`), the
# list below can: what a filesystem needs to find and address the store, never to prove
# who is asking. A true/false or a number holds no secret unless its name says one.
SAFE_OPTIONS = frozenset(name.lower() for name in (
    # where and how: s3fs/botocore, gcsfs, adlfs, sshfs, the local filesystem
    "endpoint_url", "endpoint", "region", "region_name", "profile", "profile_name",
    "anon", "use_ssl", "verify", "requester_pays", "version_aware", "cache_regions",
    "default_block_size", "default_fill_cache", "default_cache_type", "fixed_upload_size",
    "skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_concurrency",
    "asynchronous", "auto_mkdir", "project", "location", "account_name", "container",
    "host", "port", "username", "user", "client_keys", "known_hosts", "timeout",
    # botocore's config: timeouts, retries, addressing
    "connect_timeout", "read_timeout", "max_pool_connections", "retries", "mode",
    "max_attempts", "s3", "addressing_style", "signature_version", "use_accelerate_endpoint",
    # server-side encryption with a KMS key (an ARN or an id names the key, it is not one)
    "sse_kms_key_id", "ssekmskeyid", "serversideencryption", "acl", "storageclass"))
SECRET_OPTION = re.compile(r"secret|token|passw|passphrase|credential|private|signature|"
                           r"(^|_)key(_id)?$|^key$|access_key|api_?key|auth|pwd|cookie",
                           re.IGNORECASE)
ARN = re.compile(r"arn:aws[a-z-]*:[a-z0-9-]+:", re.IGNORECASE)
STORE_SCHEMES_LOCAL = ("file", "local")


def secret_options(options, where: str = "options") -> list[str]:
    """The dotted names of options (nested tables and lists too) whose value may be a
    secret: every one not known to hold none (SAFE_OPTIONS), and any URL that carries a
    password or a query (a token rides there)."""
    found, stack = [], [(where, "", options)]
    while stack:
        path, name, value = stack.pop()
        if isinstance(value, dict):
            stack += [(f"{path}.{key}", str(key), item) for key, item in value.items()]
        elif isinstance(value, (list, tuple)):
            stack += [(f"{path}[{i}]", name, item) for i, item in enumerate(value)]
        elif _may_be_secret(name, value):
            found.append(path)
    return sorted(found)


def _may_be_secret(name: str, value) -> bool:
    looks = bool(SECRET_OPTION.search(name))
    if value is None or isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return looks
    text = str(value)
    if "://" in text and _url_carries_secret(text):
        return True
    if name.lower() in SAFE_OPTIONS:
        return False
    return looks or not ARN.match(text)


def _url_carries_secret(url: str) -> bool:
    """A password (`user:pass@`) or a query (`?sig=…`) in `url`, or a URL that cannot be
    read (taken for one)."""
    try:
        parts = urlsplit(url)
        return parts.password is not None or bool(parts.query) or bool(parts.fragment)
    except ValueError:
        return True


def shown_url(url: str) -> str:
    """`url` as it may be shown or kept: without a password (`user:pass@` -> `user@`),
    a query or a fragment, where a token may ride. What cannot be parsed is not shown."""
    try:
        parts = urlsplit(str(url))
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        return "(a URL that cannot be read)"
    netloc = parts.netloc
    if parts.password is not None or "@" in netloc:
        user = f"{parts.username}@" if parts.username and parts.password is None else ""
        netloc = f"{user}{host}{port}"
    return parts._replace(netloc=netloc, query="", fragment="").geturl()


def without_url_secrets(text: str, url: str) -> str:
    """`text` (a library's error, which may quote the URL it was given) with `url`'s
    password, query and fragment replaced by `***`."""
    try:
        parts = urlsplit(str(url))
        secrets = [parts.password, parts.query, parts.fragment]
    except ValueError:
        return text.replace(str(url), "***")
    for secret in sorted((s for s in secrets if s), key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def read_store(table, problems) -> StorePlan | None:
    """`[store] url` and `options`; an option that may hold a secret is refused in words
    (its name, never its value)."""
    if table is None:
        return None
    r = Reader(table, "store", problems)
    url = r.get_str("url", required=True) or ""
    options = r.get_table("options") or {}
    bundle_mb = r.get_number("bundle_mb", None, positive=True)
    r.reject_unknown(r.seen)
    if url:
        scheme = url.split("://", 1)[0] if "://" in url else ""
        if not scheme or not re.fullmatch(r"[a-z][a-z0-9+.-]*", scheme):
            r.problem("url", f"{describe(shown_url(url))} is not a storage URL: write it as "
                      "fsspec reads "
                      "it, e.g. \"s3://bucket/prefix\", \"sftp://user@host/path\" or "
                      "\"file:///mnt/volume/campaigns\"")
        elif _url_carries_secret(url):
            r.problem("url", f"{describe(shown_url(url))} carries a password or a query "
                      "(?…, where a token rides): campaign.toml is kept in the bundle; "
                      "give the credentials where the storage library looks for them "
                      "(~/.ssh for sftp, the environment or ~/.aws for s3)")
        elif scheme in STORE_SCHEMES_LOCAL and not url.split("://", 1)[1].startswith("/"):
            r.problem("url", f"{describe(shown_url(url))}: a local store needs an absolute "
                      "path (file:///mnt/volume/x)")
    for name in secret_options(options):
        problems.append(f"store.{name}: may hold a secret (only options known to hold none "
                        "are kept: endpoint_url, region_name, profile, sse_kms_key_id…); "
                        "campaign.toml is frozen into .itera/plan.toml, the bundle and the "
                        "store, so credentials never go there: use the environment "
                        "(AWS_ACCESS_KEY_ID, AZURE_STORAGE_CONNECTION_STRING, ...), a "
                        "`profile` from ~/.aws, or ~/.ssh for sftp")
    if not url:
        return None
    return StorePlan(url=url.rstrip("/") if not url.endswith("://") else url,
                     options=tuple(sorted(options.items())), bundle_mb=bundle_mb)
