"""The ending as a person reads it on the done screen: verdict, budget, bundle, retrieval.

Built from the session's `Ending` (the same record headless and `status`
print), so the control room says the same words. The retrieval command names
the bundle's folder on the box through placeholders (`<user>@<box>`,
`<campaign-dir>`: the folder that holds campaign.toml) and lands it in a
folder named after the campaign, as report.md says.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..campaign.retrieval import bundle_folder, retrieval_command  # noqa: F401 (one wording)
from . import format as fmt
from .room import budget_short, release_text

VERDICT_TITLE = {"yes": "answered yes", "no": "answered no", "inconclusive": "inconclusive"}


@dataclass(frozen=True)
class EndingView:
    title: str
    verdict_kind: str
    facts: tuple[tuple[str, str], ...]  # (label, text)
    command: str | None  # the retrieval command, on a line of its own


def ending_view(plan, ending, phase: str) -> EndingView:
    kind = ending.verdict.kind
    facts = [("verdict", f"{VERDICT_TITLE.get(kind, kind)}: {ending.verdict.reason}"),
             ("budget", budget_short(ending))]
    if ending.per_deliverable_usd is None:
        facts.append(("", f"{fmt.usd(ending.incurred_usd)} incurred; why no {ending.unit} "
                          "was accepted:"))
        facts += [("", f"· {cause}") for cause in ending.causes[:4]]
        if len(ending.causes) > 4:
            facts.append(("", f"· … {len(ending.causes) - 4} more in report.md"))
    else:
        facts.append(("", f"{ending.accepted} accepted, {fmt.usd(ending.incurred_usd)} "
                          "incurred"))
    command = None
    if ending.bundle:
        facts.append(("bundle", f"{ending.bundle}/ ("
                                + ("verified" if ending.verified else "NOT verified") + ")"))
        command = retrieval_command(plan, ending.bundle)
    else:
        facts.append(("bundle", "not built yet"))
    facts.append(("rental", release_text(ending.window_left_s) if phase == "done"
                  else "the bundle is not verified yet: keep the box"))
    title = "The campaign is over: the bundle is verified" if phase == "done" \
        else "The runs are over"
    return EndingView(title, kind, tuple(facts), command)
