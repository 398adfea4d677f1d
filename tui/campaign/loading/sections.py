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

from ..plan import (CATEGORIES, DEFAULT_BASELINE_RECORDS, Checkpoint, Deliverables, Pilot,
                    Step, StopRule, StorePlan, Variant)
from ..validate import Reader, describe

# what the engine takes at the decision deadline: go on, wrap up, or drop the optional
# variants that an announced [[stop]] rule stopped in their pilot (then go on)
DECISION_DEFAULTS = ("continue", "wrapup", "drop-stopped")
STEP_KINDS = ("prepare", "data_check", "resume_check", "wrapup")
RULES = ("non_finite", "threshold", "truncation", "resume", "stall", "diverged")
RULE_KEYS = {
    "non_finite": ("metrics",),
    "threshold": ("metric", "below", "above", "from_step"),
    "truncation": ("metric", "max"),
    "resume": ("within_minutes",),
    "stall": ("minutes", "startup_minutes"),
    "diverged": ("metric", "factor", "baseline_records"),
}


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


def read_variant(table, i, problems) -> Variant:
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
    r.reject_unknown(r.seen)
    return Variant(id=vid, category=category or "exploratory", priority=priority or 0,
                   command=command, params=tuple(sorted(params.items())), hours=hours,
                   steps=steps, gpus=gpus, after=after)


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


# an option whose name reads like a credential: refused, since campaign.toml is frozen into
# .itera/plan.toml, the bundle and every screen (credentials stay where s3fs/boto, asyncssh
# and the other fsspec backends already look: the environment, ~/.aws profiles, ~/.ssh)
SECRET_OPTION = re.compile(r"secret|token|passw|passphrase|credential|private|signature|"
                           r"(^|_)key(_id)?$|^key$|access_key|api_?key|auth", re.IGNORECASE)
STORE_SCHEMES_LOCAL = ("file", "local")


def secret_options(options, where: str = "options") -> list[str]:
    """The dotted names of options (nested tables too) that look like a secret, and
    endpoints that carry a password in their URL."""
    found, stack = [], [(where, options)]
    while stack:
        prefix, table = stack.pop()
        for key, value in table.items():
            name = f"{prefix}.{key}"
            if SECRET_OPTION.search(str(key)):
                found.append(name)
            elif isinstance(value, dict):
                stack.append((name, value))
            elif isinstance(value, str) and "://" in value and _has_password(value):
                found.append(name)
    return sorted(found)


def _has_password(url: str) -> bool:
    try:
        return urlsplit(url).password is not None
    except ValueError:
        return False


def read_store(table, problems) -> StorePlan | None:
    """`[store] url` and `options`; a secret-looking option is refused in words."""
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
            r.problem("url", f"{describe(url)} is not a storage URL: write it as fsspec reads "
                      "it, e.g. \"s3://bucket/prefix\", \"sftp://user@host/path\" or "
                      "\"file:///mnt/volume/campaigns\"")
        elif _has_password(url):
            r.problem("url", "carries a password: campaign.toml is kept in the bundle; "
                      "give the credentials where the storage library looks for them "
                      "(~/.ssh for sftp, the environment or ~/.aws for s3)")
        elif scheme in STORE_SCHEMES_LOCAL and not url.split("://", 1)[1].startswith("/"):
            r.problem("url", f"{describe(url)}: a local store needs an absolute path "
                      "(file:///mnt/volume/x)")
    for name in secret_options(options):
        problems.append(f"store.{name}: looks like a secret; campaign.toml is frozen into "
                        ".itera/plan.toml and the bundle, so credentials never go there: "
                        "use the environment (AWS_ACCESS_KEY_ID, ...), a `profile` from "
                        "~/.aws, or ~/.ssh for sftp")
    if not url:
        return None
    return StorePlan(url=url.rstrip("/") if not url.endswith("://") else url,
                     options=tuple(sorted(options.items())), bundle_mb=bundle_mb)
