"""`itera-tui hosts install`: this box's itera-tui installed on each other box, over ssh.

For each box whose check (`check --hosts`) says the package is missing or is
another version, one bounded ssh call runs `PYTHON -m pip install
itera-tui==VERSION` with the lot's interpreter (`[[lot]] python`, else
`python3` there; once more in place, `--force-reinstall --no-deps`, when pip
found another copy of that version "already satisfied"), then the box is checked
again and its line printed: the same
words as `check --hosts`, so what is still missing is named. pip reads its own
configuration there (an index, `PIP_FIND_LINKS` for a box without internet).
"""

from __future__ import annotations

from ..campaign.boxes import BoxShare
from ..campaign.plan import Plan
from .fingerprint import version
from .hosts import HostCheck, check_host, each_host, printable
from .ssh import Ssh, SshSettings

INSTALL_TIMEOUT_S = 900.0
NEEDS_INSTALL = ("package: ", "version: ")  # check lines an install can cure


def install_host(share: BoxShare, settings: SshSettings, need_bytes: int,
                 timeout_s: float = INSTALL_TIMEOUT_S) -> HostCheck:
    before = check_host(share, settings, need_bytes)
    said = before.line.split(": ", 1)[1] if ": " in before.line else before.line
    if before.ok or not said.startswith(NEEDS_INSTALL):
        return before  # ready already, or something pip cannot cure (said as it is)
    result = _pip(share, settings, "", timeout_s)
    after = check_host(share, settings, need_bytes) if result.ok else None
    if after is not None and not after.ok and after.line.split(": ", 1)[-1].startswith(
            NEEDS_INSTALL):
        # pip found the version "already satisfied" (another copy's metadata, other code
        # of the same version): put this one in place, its dependencies now there
        result = _pip(share, settings, " --force-reinstall --no-deps", timeout_s)
        after = check_host(share, settings, need_bytes) if result.ok else None
    if after is not None:
        return after
    last = [printable(line) for line in (result.stderr or result.stdout).splitlines()
            if line.strip()]
    why = last[-1] if last else printable(result.reason())
    return HostCheck(share.box, share.lots, False,
                     f"{before.line.split(': ', 1)[0]}: not installed: pip said: {why}")


def _pip(share: BoxShare, settings: SshSettings, options: str, timeout_s: float):
    script = (f'cd "$HOME" 2>/dev/null\nexec {share.far_python} -m pip install '
              f"--disable-pip-version-check{options} itera-tui=={version()}\n")
    return Ssh(share.host, settings).run_script(script, timeout_s=timeout_s)


def install_hosts(plan: Plan, settings: SshSettings | None = None) -> list[HostCheck]:
    return each_host(plan, settings, install_host)
