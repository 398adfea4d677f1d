"""The command that copies a bundle off the box, in one wording.

On the done screen it is ready to paste on the person's own machine: the real
user, the address and port their ssh came in on (`SSH_CONNECTION`), the
campaign's absolute folder (`Origin.here`). In what is kept or sent (the
report, a notice) the box's folder is named by placeholders (`<user>@<box>`,
`<campaign-dir>`: the folder that holds campaign.toml), since no path of this
machine goes into what a user keeps. The copy lands in a folder named after
the campaign, as report.md says.

A folder under the person's home is named from it (`user@box:nli/outputs/bundle/`,
which ssh, rsync and scp read from the home folder), so the command usually fits an
80-column pane; where it still does not, `wrapped` breaks it between arguments with
shell line continuations, so the lines pasted together are still one command.
"""

from __future__ import annotations

import getpass
import os
import re
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
    home: str | None = None  # the user's home folder on the box: the folder is named from it

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
        try:
            home = str(Path(env.get("HOME") or Path.home()).resolve())
        except (KeyError, OSError, RuntimeError):
            home = None
        return cls(user, host, port, str(Path(plan.root).resolve()), home)

    def remote_folder(self) -> str:
        """The campaign folder as the far side reads it: relative to the home folder
        when it is under it (shorter, and the same on every box), else absolute."""
        folder = self.folder.rstrip("/") or "/"
        if self.home and self.home != "/":
            home = self.home.rstrip("/")
            if folder.startswith(home + "/"):
                return folder[len(home) + 1:]
        return folder


def bundle_folder(plan) -> str:
    """`./NAME-bundle`, NAME the campaign's name with each run of characters a folder
    name should not hold made one dash ("demo: topic" -> `demo-topic`, never
    `demo--topic`), and no leading dot or dash (a hidden folder, an option)."""
    name = re.sub(r"[^\w.-]+", "-", plan.campaign.name, flags=re.ASCII)
    name = re.sub(r"-{2,}", "-", name).strip("-").lstrip(".") or "campaign"
    return f"./{name}-bundle"


def retrieval_command(plan, bundle_rel: str, origin: Origin | None = None) -> str:
    """One line to paste on the person's own machine (placeholders without `origin`)."""
    if origin is None:
        return (f"rsync -avP <user>@<box>:<campaign-dir>/{bundle_rel.strip('/')}/ "
                f"{bundle_folder(plan)}")
    remote = f"{origin.remote_folder().rstrip('/')}/{bundle_rel.strip('/')}/"
    ssh = f"-e {shlex.quote(f'ssh -p {origin.port}')} " if origin.port else ""
    return (f"rsync -avP {ssh}{shlex.quote(f'{origin.user}@{origin.host}:{remote}')} "
            f"{bundle_folder(plan)}")


CONTINUATION = " \\"
INDENT = "  "


def _atoms(word: str) -> list[str] | None:
    """`word` quoted for a shell as pieces that may be cut between: an unquoted word, or
    a double-quoted one where a backslash-newline is removed too (None for a word with
    `!`, which an interactive shell's history expansion reads even in double quotes)."""
    if "!" in word:
        return None
    if shlex.quote(word) == word:
        return list(word)
    return ['"', *(f"\\{ch}" if ch in '\\"$`' else ch for ch in word), '"']


def _cut(word: str, first: int, width: int) -> list[str]:
    """A word too long for a line, in lines joined by backslash-newline (removed by the
    shell inside a word): the first at most `first` columns, the others `width`."""
    atoms = _atoms(word)
    if atoms is None:
        return [shlex.quote(word)]
    lines, line, room = [], "", first
    for atom in atoms:
        if line and len(line) + len(atom) + 1 > room:
            lines.append(line + "\\")
            line, room = "", width
        line += atom
    return lines + [line]


def wrapped(command: str, width: int) -> str:
    """`command` on lines of at most `width` columns, broken between arguments with
    ` \\` line continuations, and inside an argument longer than a line with a bare
    backslash-newline: a shell reads the lines pasted together as the one command."""
    if len(command) <= width:
        return command
    try:
        tokens = shlex.split(command)
    except ValueError:
        return command
    units: list[list[str]] = []  # an option stays with its value: `-e 'ssh -p 2'`
    for token in tokens:
        if units and units[-1] == ["-e"]:
            units[-1].append(token)
        else:
            units.append([token])
    lines: list[str] = []
    line = ""
    for unit in units:
        text = " ".join(shlex.quote(w) for w in unit)
        candidate = f"{line} {text}" if line else text
        if len(candidate) + len(CONTINUATION) <= width or (not lines and not line):
            line = candidate
            continue
        if line:
            lines.append(line + CONTINUATION)
        if len(INDENT + text) + len(CONTINUATION) <= width or len(unit) > 1:
            line = INDENT + text
            continue
        pieces = _cut(unit[0], width - len(INDENT), width)
        lines.append(INDENT + pieces[0]) if len(pieces) > 1 else None
        lines.extend(pieces[1:-1])
        line = pieces[-1] if len(pieces) > 1 else INDENT + pieces[0]
    lines.append(line)
    return "\n".join(lines)


def fetch_file(bundle_rel: str) -> str:
    """Where the wrap-up writes the fetch command beside the bundle, relative to the
    campaign folder (`outputs/FETCH.txt`): `cat` shows it whole, however wide the pane."""
    parent = bundle_rel.strip("/").rsplit("/", 1)[0] if "/" in bundle_rel.strip("/") else "."
    return f"{parent}/FETCH.txt" if parent != "." else "FETCH.txt"


def _store_env(plan) -> str:
    """The store's endpoint for a command run elsewhere (`ITERA_STORE_ENDPOINT=… `), when
    `[store] options` names one; the credentials are the machine's own, never here."""
    endpoint = dict(plan.store.options).get("endpoint_url") if plan.store else None
    return f"ITERA_STORE_ENDPOINT={shlex.quote(str(endpoint))} " if endpoint else ""


def store_fetch_command(plan, url: str) -> str:
    """The line that copies a bundle out of its store (`[store]`), each file checked
    against the manifest as it arrives: the store needs no box to be alive."""
    return f"{_store_env(plan)}itera-tui fetch {shlex.quote(url)} {bundle_folder(plan)}"


def store_resume_command(plan) -> str:
    """The line that continues the campaign on a new box from its store. The new box is a
    lot, given as this box's first lot (`--lot`, inline): it runs as pasted when the new
    box is rented alike, and says which keys to change when it is not."""
    from .loading.lots import inline_lot

    lots = getattr(plan, "lots", ())
    lot = inline_lot(lots[0]) if lots else 'gpu = "GPU", days = 1, price_usd = 0.0'
    return (f"{_store_env(plan)}itera-tui resume {shlex.quote(plan.store.url)} DIR "
            f"--lot {shlex.quote(lot)}")


def fetch_command(plan, bundle_rel: str, origin, stored_bundle=None) -> str:
    """The one command the ending offers for taking the bundle: from the store once it
    verified there (`[store]`: it needs no box to be alive), else rsync from this box.
    The done screen, headless's last lines and `outputs/FETCH.txt` all say this one."""
    if stored_bundle is not None and getattr(stored_bundle, "verified", False):
        return store_fetch_command(plan, stored_bundle.url)
    return retrieval_command(plan, bundle_rel, origin)
