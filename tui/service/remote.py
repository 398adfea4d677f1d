"""A room on this box following a campaign's engine on another box, through ssh.

`itera-tui --host DEST:DIR` runs `ssh DEST itera-tui attach --stdio --start DIR`
with the user's own OpenSSH client and config (`tui.remote.ssh`: BatchMode, so
never a password prompt inside the room; one ControlMaster connection), and
speaks the engine's protocol through that pipe. The plan the room lays out is
the far engine's frozen plan, sent in its hello. A lost link is the client's
usual reconnect with backoff, from the last seq; the far engine never notices.

`ITERA_REMOTE_COMMAND` names the far command when `itera-tui` is not on the far
PATH (`"python3 -m tui.cli"`, `"~/venv/bin/itera-tui"`).
"""

from __future__ import annotations

import os
import shlex
import tomllib
from pathlib import PurePosixPath

from .client import EngineClient, EngineUnavailable, pipe_transport

REMOTE_COMMAND_ENV = "ITERA_REMOTE_COMMAND"


def split_host(spec: str) -> tuple[str, str]:
    """`DEST:DIR` into the ssh destination and the far campaign folder."""
    dest, sep, folder = spec.rpartition(":")
    if not sep or not dest.strip() or not folder.strip():
        raise EngineUnavailable(f"--host {spec!r}: expected DEST:DIR, an ssh destination "
                                "and the campaign folder there (user@box:~/camp)")
    return dest.strip(), folder.strip()


def far_command(python: str | None = None) -> list[str]:
    """The far `itera-tui`: the environment's override, else the lot's interpreter
    (`[[lot]] python`; `~/x` is `x` from the home an ssh command starts in), else
    `itera-tui` on the far PATH."""
    if os.environ.get(REMOTE_COMMAND_ENV):
        return shlex.split(os.environ[REMOTE_COMMAND_ENV])
    if python:
        return [python[2:] if python.startswith("~/") else python, "-m", "tui.cli"]
    return ["itera-tui"]


def bridge_argv(dest: str, folder: str, python: str | None = None) -> list[str]:
    from ..campaign.destination import DestinationError
    from ..remote.ssh import connect

    try:
        ssh = connect(dest)
    except DestinationError as exc:
        raise EngineUnavailable(f"--host: {exc}") from None
    return ssh.argv([*far_command(python), "attach", "--stdio", "--start", folder])


def plan_of_hello(hello: dict, dest: str, folder: str):
    """The far engine's frozen plan, as this box can read it (its files stay there)."""
    from ..campaign.loading.load import plan_from_dict

    try:
        raw = tomllib.loads(str(hello.get("plan_toml") or ""))
    except tomllib.TOMLDecodeError as exc:
        raise EngineUnavailable(f"the far engine's plan cannot be read: {exc}") from None
    where = PurePosixPath("/") / "remote" / (hello.get("folder") or PurePosixPath(folder).name)
    return plan_from_dict(raw, where / "campaign.toml", check_files=False)


def remote_client(spec: str, name: str = "room") -> EngineClient:
    dest, folder = split_host(spec)
    client = EngineClient(pipe_transport(bridge_argv(dest, folder)), name=name,
                          where=dest, backoff=(1.0, 2.0, 4.0, 8.0, 10.0))
    return client.open(plan_from_hello=lambda hello: plan_of_hello(hello, dest, folder))
