"""The command that copies a bundle off the box, in one wording.

On the done screen it is ready to paste on the person's own machine: the real
user, the address and port their ssh came in on (`SSH_CONNECTION`), the
campaign's absolute folder (`Origin.here`). In what is kept or sent (the
report, a notice) the box's folder is named by placeholders (`<user>@<box>`,
`<campaign-dir>`: the folder that holds campaign.toml), since no path of this
machine goes into what a user keeps. The copy lands in a folder named after
the campaign, as report.md says.
"""

from __future__ import annotations

import getpass
import os
import shlex
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Origin:
    """Where the bundle is fetched from: who, which address and port, which folder."""
    user: str
    host: str  # `<box>` when unknown
    port: int | None  # None: the default (22)
    folder: str  # the campaign's folder on the box, absolute

    @classmethod
    def here(cls, plan, environ=None) -> "Origin":
        env = os.environ if environ is None else environ
        try:
            user = getpass.getuser()
        except (KeyError, OSError):
            user = "<user>"
        host, port = "<box>", None
        parts = (env.get("SSH_CONNECTION") or "").split()
        if len(parts) == 4:  # client address, client port, server address, server port
            host = f"[{parts[2]}]" if ":" in parts[2] else parts[2]
            port = int(parts[3]) if parts[3].isdigit() and parts[3] != "22" else None
        return cls(user, host, port, str(Path(plan.root).resolve()))


def bundle_folder(plan) -> str:
    name = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in plan.campaign.name)
    return f"./{name}-bundle"


def retrieval_command(plan, bundle_rel: str, origin: Origin | None = None) -> str:
    """One line to paste on the person's own machine (placeholders without `origin`)."""
    if origin is None:
        return (f"rsync -avP <user>@<box>:<campaign-dir>/{bundle_rel.strip('/')}/ "
                f"{bundle_folder(plan)}")
    remote = f"{origin.folder.rstrip('/')}/{bundle_rel.strip('/')}/"
    ssh = f"-e {shlex.quote(f'ssh -p {origin.port}')} " if origin.port else ""
    return (f"rsync -avP {ssh}{shlex.quote(f'{origin.user}@{origin.host}:{remote}')} "
            f"{bundle_folder(plan)}")


def store_fetch_command(plan, url: str) -> str:
    """The line that copies a bundle out of its store (`[store]`), each file checked
    against the manifest as it arrives: the store needs no box to be alive."""
    endpoint = dict(plan.store.options).get("endpoint_url") if plan.store else None
    env = f"ITERA_STORE_ENDPOINT={shlex.quote(str(endpoint))} " if endpoint else ""
    return f"{env}itera-tui fetch {shlex.quote(url)} {bundle_folder(plan)}"
