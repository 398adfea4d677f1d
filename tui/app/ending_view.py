"""The ending as a person reads it on the done screen: verdict, budget, bundle, figures,
retrieval.

Built from the session's `Ending` (the same record headless and `status`
print), so the control room says the same words. The retrieval command is
ready to paste: the real user, the address and port this person's ssh came
in on (`SSH_CONNECTION`), the campaign's absolute folder, landing in a folder
named after the campaign; a placeholder only where it cannot know (no
`SSH_CONNECTION`: `<box>`). It is on screen only: report.md, which the
person keeps, names the folder with placeholders (no machine path in a file).
Where the figures are, or why there are none, comes from the bundle's
manifest (`figures`), read once per bundle.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..campaign.retrieval import Origin, bundle_folder, retrieval_command  # noqa: F401
from ..campaign.retrieval import fetch_command
from . import format as fmt
from .room import budget_short, release_text

VERDICT_TITLE = {"yes": "answered yes", "no": "answered no", "inconclusive": "inconclusive"}
MANIFEST_LIMIT = 8 << 20  # a manifest bigger than this is not read for the figures line


@dataclass(frozen=True)
class EndingView:
    title: str
    verdict_kind: str
    facts: tuple[tuple[str, str], ...]  # (label, text)
    command: str | None  # the retrieval command, on a line of its own
    bundle: str | None = None  # the bundle's folder, relative to the campaign folder


@lru_cache(maxsize=4)
def _figures_of(manifest: str, mtime_ns: int) -> dict | None:
    try:
        path = Path(manifest)
        if path.stat().st_size > MANIFEST_LIMIT:
            return None
        figures = json.loads(path.read_text()).get("figures")
    except (OSError, ValueError, AttributeError):
        return None
    return figures if isinstance(figures, dict) else None


def figures_text(plan, bundle_rel: str) -> str:
    """Where the bundle's figures are, or why it has none."""
    manifest = Path(plan.root) / bundle_rel / "manifest.json"
    try:
        figures = _figures_of(str(manifest), manifest.stat().st_mtime_ns)
    except OSError:
        figures = None
    if figures is None:
        return "see report.md in the bundle"
    files = [f for f in figures.get("files") or [] if isinstance(f, str)
             and f.endswith(".png")]
    if not files:
        return f"none drawn: {figures.get('problem') or 'nothing was drawn'} (report.md says so)"
    return (f"{', '.join(f'{bundle_rel.rstrip(chr(47))}/{f}' for f in files)} "
            "(their series: figures.json)")


def ending_view(plan, ending, phase: str, origin: Origin | None = None) -> EndingView:
    kind = ending.verdict.kind
    facts = [("verdict", f"{VERDICT_TITLE.get(kind, kind)}: {ending.verdict.reason}"),
             ("budget", budget_short(ending))]
    if ending.per_deliverable_usd is None:
        facts.append(("", f"{fmt.usd(ending.incurred_usd)} incurred; why no {ending.unit} "
                          "was accepted:"))
        facts += [("", f"· {cause}") for cause in ending.causes]
    else:
        facts.append(("", f"{ending.accepted} accepted, {fmt.usd(ending.incurred_usd)} "
                          "incurred"))
    command = None
    stored = getattr(ending, "store", None)
    if ending.bundle:
        facts.append(("bundle", f"{ending.bundle}/ ("
                                + ("verified" if ending.verified else "NOT verified") + ")"))
        facts.append(("figures", figures_text(plan, ending.bundle)))
        # rsync from this box, or the store's copy once it verified there
        command = fetch_command(plan, ending.bundle, origin or Origin.here(plan),
                                getattr(stored, "bundle", None))
    else:
        facts.append(("bundle", "not built yet"))
    if stored is not None:  # [store]: what is off the box, and the bundle verified there
        facts.append(("off-box", stored.text()))
        if stored.bundle is not None:
            facts.append(("at store", f"{stored.bundle.url} ("
                          + ("verified there" if stored.bundle.verified else "NOT verified "
                             "there: " + "; ".join(stored.bundle.failures[:2])) + ")"))
    facts.append(("rental", release_text(ending.window_left_s) if phase == "done"
                  else "the bundle is not verified yet: keep the box"))
    title = "The campaign is over: the bundle is verified" if phase == "done" \
        else "The runs are over"
    return EndingView(title, kind, tuple(facts), command, ending.bundle)
