"""The command that copies a bundle off the box, in one wording.

Said on the done screen and in the wrap-up notice, from the person's own
machine: the box's folder is named by placeholders (`<user>@<box>`,
`<campaign-dir>`: the folder that holds campaign.toml), the copy lands in a
folder named after the campaign, as report.md says.
"""

from __future__ import annotations


def bundle_folder(plan) -> str:
    name = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in plan.campaign.name)
    return f"./{name}-bundle"


def retrieval_command(plan, bundle_rel: str) -> str:
    return f"rsync -avP <user>@<box>:<campaign-dir>/{bundle_rel.strip('/')}/ {bundle_folder(plan)}"
