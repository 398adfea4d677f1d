"""The ssh destination a lot names, and every call made through the user's OpenSSH.

Why one module: a rented box is reached the way its renter already reaches it
(`ssh gpu2`, `ssh root@203.0.113.7 -p 40022`), so the destination is parsed into its
parts once, and every ssh or rsync call is built here with the same options:

- `BatchMode=yes`: no password or passphrase prompt ever (a prompt would hang a
  campaign that runs while its owner sleeps);
- `ConnectTimeout` and `ServerAlive*`: a dead link is found in seconds, not hours;
- one ControlMaster connection per host, its socket in a private 0700 runtime
  directory, kept a while (`ControlPersist`) so repeated probes cost one handshake;
- the user's own `~/.ssh/config` and host-key policy are respected (nothing here sets
  StrictHostKeyChecking); `ITERA_SSH_CONFIG` names another config file (`ssh -F`),
  which the tests use for their own sshd.

Every call has a deadline and returns a frozen `CommandResult`; nothing here raises
on a failed, refused or hung connection, so a caller turns it into one clear line.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime import private_dir
from ..campaign.destination import Destination, DestinationError, parse_destination

CONFIG_ENV = "ITERA_SSH_CONFIG"  # an ssh_config file to use instead of ~/.ssh/config
CONTROL_DIR_ENV = "ITERA_SSH_CONTROL_DIR"  # where the ControlMaster sockets live
OUTPUT_LIMIT = 1 << 20  # characters kept of a call's stdout and of its stderr
SSH_UNREACHABLE = 255  # ssh's own exit status when it could not connect or authenticate


@dataclass(frozen=True)
class SshSettings:
    """How every ssh call is made; `from_env()` is what the product uses."""

    config_file: Path | None = None  # ssh -F; None: the user's own ~/.ssh/config
    control_dir: Path | None = None  # None: private_runtime_dir() at first use
    connect_timeout_s: int = 10
    server_alive_interval_s: int = 5
    server_alive_count_max: int = 3
    control_persist_s: int = 300
    ssh: str = "ssh"
    rsync: str = "rsync"

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "SshSettings":
        env = os.environ if environ is None else environ
        config = env.get(CONFIG_ENV) or None
        control = env.get(CONTROL_DIR_ENV) or None
        return cls(config_file=Path(config) if config else None,
                   control_dir=Path(control) if control else None)

    def base_args(self) -> tuple[str, ...]:
        """ssh's own flags for every call, before the destination's."""
        control = self.control_dir or private_runtime_dir()
        config = ("-F", str(self.config_file)) if self.config_file else ()
        return (*config,
                "-o", "BatchMode=yes",
                "-o", f"ConnectTimeout={self.connect_timeout_s}",
                "-o", f"ServerAliveInterval={self.server_alive_interval_s}",
                "-o", f"ServerAliveCountMax={self.server_alive_count_max}",
                "-o", "ControlMaster=auto",
                "-o", f"ControlPath={control}/%C",
                "-o", f"ControlPersist={self.control_persist_s}")


def private_runtime_dir() -> Path:
    """A directory only this user can enter, for the ControlMaster sockets."""
    return private_dir("ssh")


@dataclass(frozen=True)
class CommandResult:
    """What one bounded ssh or rsync call did. `returncode` is None when it never ran
    to an end (timed out, or the program could not start)."""

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    error: str | None = None  # why it could not start (e.g. ssh is not installed)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    @property
    def unreachable(self) -> bool:
        """ssh itself failed: no connection, refused, host key or authentication."""
        return self.timed_out or self.error is not None or self.returncode == SSH_UNREACHABLE

    def reason(self) -> str:
        """One line for the user: why the call did not succeed ("" when it did)."""
        if self.ok:
            return ""
        if self.error:
            return self.error
        if self.timed_out:
            return "no answer before the deadline"
        last = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        detail = last[-1] if last else f"exit status {self.returncode}"
        return detail[:300]


def run_bounded(argv: list[str] | tuple[str, ...], timeout_s: float,
                input_text: str | None = None, cwd: Path | None = None) -> CommandResult:
    """Run argv in its own process group with a deadline; on the deadline the whole
    group is killed (ssh, and any rsync it started), never left behind."""
    argv = tuple(str(a) for a in argv)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input_text is not None
                                else subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, errors="replace",
                                start_new_session=True, cwd=cwd)
    except OSError as exc:
        return CommandResult(argv=argv, returncode=None,
                             error=f"cannot start {argv[0]}: {exc.strerror or exc}")
    try:
        out, err = proc.communicate(input_text, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=5)
        except subprocess.TimeoutExpired:
            out, err = "", ""
        return CommandResult(argv=argv, returncode=None, stdout=out[-OUTPUT_LIMIT:],
                             stderr=err[-OUTPUT_LIMIT:], timed_out=True)
    return CommandResult(argv=argv, returncode=proc.returncode, stdout=out[-OUTPUT_LIMIT:],
                         stderr=err[-OUTPUT_LIMIT:])


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


@dataclass(frozen=True)
class Ssh:
    """Calls to one destination with one set of settings."""

    destination: Destination
    settings: SshSettings = field(default_factory=SshSettings.from_env)

    def argv(self, remote_argv: list[str] | tuple[str, ...] | None = None) -> list[str]:
        """The full ssh command line; the far command is quoted for the far shell."""
        base = [self.settings.ssh, *self.settings.base_args(),
                *self.destination.connection_args(), self.destination.target]
        if remote_argv is None:
            return base
        return [*base, "--", shlex.join(str(a) for a in remote_argv)]

    def run(self, remote_argv: list[str] | tuple[str, ...], timeout_s: float = 30,
            input_text: str | None = None) -> CommandResult:
        """Run a command on the far side (argv, quoted for its shell), with a deadline."""
        return run_bounded(self.argv(remote_argv), timeout_s, input_text)

    def run_script(self, script: str, timeout_s: float = 30) -> CommandResult:
        """Run a POSIX sh script on the far side, fed on stdin (no quoting to get wrong)."""
        return run_bounded(self.argv(["sh", "-s"]), timeout_s, input_text=script)

    def close(self, timeout_s: float = 10) -> CommandResult:
        """End this host's ControlMaster connection, if one is up."""
        argv = [self.settings.ssh, *self.settings.base_args(),
                *self.destination.connection_args(), "-O", "exit", self.destination.target]
        return run_bounded(argv, timeout_s)

    def remote_shell(self) -> str:
        """The ssh command line rsync is given with `-e` (every option, no host)."""
        return shlex.join([self.settings.ssh, *self.settings.base_args(),
                           *self.destination.connection_args()])

    def resolve_dir(self, path: str, timeout_s: float = 30) -> tuple[str | None, str]:
        """(absolute path, "") of a far folder given from the far home, or (None, why).

        Every far command and rsync then names the same folder, whatever directory
        the far side starts a session in."""
        if path.startswith("/"):
            return path, ""
        result = self.run_script('printf "%s\\n" "$HOME"\n', timeout_s=timeout_s)
        home = result.stdout.strip()
        if not result.ok or not home.startswith("/"):
            return None, result.reason() or "the far side gave no home directory"
        return f"{home.rstrip('/')}/{path}" if path not in ("", ".") else home, ""

    def remote_path(self, path: str) -> str:
        """`[user@]host:path` as rsync names a far path."""
        return f"{self.destination.target}:{path}"

    def rsync(self, source: str, target: str, timeout_s: float = 600,
              excludes: tuple[str, ...] = (), delete: bool = False,
              io_timeout_s: int = 60, checksum: bool = False) -> CommandResult:
        """Copy with rsync over this connection; one side is `remote_path(...)`.

        Resumable: `--partial` keeps a torn file's part, so a call after a lost link
        sends only the rest. `--timeout` ends a stalled transfer; `timeout_s` bounds
        the whole call. `checksum`: compare content, not size and time (a torn copy)."""
        argv = [self.settings.rsync, "-a", "--partial", f"--timeout={io_timeout_s}",
                "-e", self.remote_shell()]
        if checksum:
            argv.append("--checksum")
        argv += [f"--exclude={pattern}" for pattern in excludes]
        if delete:
            argv.append("--delete")
        argv += [source, target]
        return run_bounded(argv, timeout_s)


def connect(text: str, settings: SshSettings | None = None) -> Ssh:
    """An Ssh for a destination text; DestinationError when the text cannot be read."""
    return Ssh(parse_destination(text), settings or SshSettings.from_env())


__all__ = ["CONFIG_ENV", "CommandResult", "Destination", "DestinationError", "Ssh",
           "SshSettings", "connect", "parse_destination", "private_runtime_dir",
           "run_bounded"]
