"""After the start, the frozen plan is the only plan; an edited campaign.toml is named, never used.

The engine freezes `campaign.toml` into `.itera/plan.toml` at the first start
(never rewritten). A result (a verdict, a conclusion, a budget) must be a
function of that frozen plan and the ledger only: an edit of `min_gain` after
the end must not turn "answered no" into "answered yes" in `status` while the
report says "no". So every reader loads its plan through `load_started_plan`:
before the start it is `campaign.toml`; after, the frozen plan with
`plan.edited_keys` naming each key the file now differs in (dotted, arrays by
id: `campaign.min_gain`, `variant[wide].hours`), which `edit_note` turns into
the one sentence every view shows. To run the edited file, start afresh
(`itera-tui new`, which archives the old campaign).
"""

from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path

from .loading.load import load_plan, plan_from_dict
from .plan import Plan
from .validate import PlanError

FROZEN_NAME = "plan.toml"
WRITTEN_BY_ITERA = ("calibration",)  # tables only the frozen plan holds
NO_LONGER_READS = "campaign.toml (it no longer reads as TOML)"


def frozen_path(campaign_path: str | Path) -> Path:
    return Path(campaign_path).resolve().parent / ".itera" / FROZEN_NAME


def _flat(value, prefix: str, out: dict) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            _flat(item, f"{prefix}.{key}" if prefix else str(key), out)
    elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        ids = [v.get("id") for v in value]
        by_id = all(isinstance(i, str) for i in ids) and len(set(ids)) == len(ids)
        for i, item in enumerate(value):
            _flat(item, f"{prefix}[{ids[i] if by_id else i}]", out)
    else:
        out[prefix] = value


def edited_keys(frozen_raw: dict, current_raw: dict) -> tuple[str, ...]:
    """The dotted keys in which `current_raw` differs from `frozen_raw` (sorted)."""
    old, new = {}, {}
    _flat({k: v for k, v in frozen_raw.items() if k not in WRITTEN_BY_ITERA}, "", old)
    _flat({k: v for k, v in current_raw.items() if k not in WRITTEN_BY_ITERA}, "", new)
    return tuple(sorted(k for k in old.keys() | new.keys() if old.get(k) != new.get(k)
                        or (k in old) != (k in new)))


LIVE_SECTIONS = ("notify",)  # read from campaign.toml as it is now: where notices go changes
# no result, may change mid-campaign, and the frozen plan keeps its addresses redacted


def _current(campaign_path: str | Path) -> dict | None:
    try:
        return tomllib.loads(Path(campaign_path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None


def _planned(raw: dict) -> dict:
    return {k: v for k, v in raw.items() if k not in LIVE_SECTIONS}


def edits_since_start(campaign_path: str | Path, frozen_raw: dict) -> tuple[str, ...]:
    current = _current(campaign_path)
    if current is None:
        return (NO_LONGER_READS,)
    return edited_keys(_planned(frozen_raw), _planned(current))


def load_started_plan(path: str | Path, check_files: bool = True) -> Plan:
    """`campaign.toml` before the start; the frozen plan after, with `edited_keys`."""
    frozen = frozen_path(path)
    if not frozen.is_file():
        return load_plan(path, check_files=check_files)
    try:
        raw = tomllib.loads(frozen.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise PlanError([f".itera/{FROZEN_NAME}: the frozen plan cannot be read ({exc}); "
                         "`itera-tui new` starts afresh (the old campaign is archived)"]) from None
    current = _current(path)
    if current is not None:  # the live sections as campaign.toml has them now
        raw = _planned(raw) | {k: current[k] for k in LIVE_SECTIONS if k in current}
    plan = plan_from_dict(raw, Path(path).resolve(), check_files=check_files)
    return replace(plan, edited_keys=edits_since_start(path, raw))


def edit_note(keys: tuple[str, ...]) -> str | None:
    """The one sentence every view shows for an edited campaign.toml, or None."""
    if not keys:
        return None
    shown = ", ".join(keys[:8]) + (f" and {len(keys) - 8} more" if len(keys) > 8 else "")
    return (f"campaign.toml was edited since the campaign started ({shown}): the results "
            "use the frozen plan .itera/plan.toml and the edit changes none of them; "
            "`itera-tui new` starts afresh with the edited file")


def edit_warning(campaign_path: Path, mark) -> tuple[str | None, object]:
    """(the edit's note as the ledger replays it, or None; the file's (mtime, size)
    mark): None at once when the mark is unchanged since the last look."""
    from .text import for_terminal  # a replayed warning is cleaned: compare it so

    try:
        stat = Path(campaign_path).stat()
        now = (stat.st_mtime_ns, stat.st_size)
    except OSError:
        now = None
    if now == mark:
        return None, mark
    try:
        frozen = tomllib.loads(frozen_path(campaign_path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None, now
    note = edit_note(edits_since_start(campaign_path, frozen))
    return (for_terminal(note) if note else None), now
