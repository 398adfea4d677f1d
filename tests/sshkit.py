"""A real OpenSSH server on 127.0.0.1 as "the second box", for multi-box tests.

`sshd` (Debian's openssh-server, installed by .ci/run) runs as the current user with
its own temp host key, authorized key, config and port; the client side gets a temp
ssh_config (BatchMode, strict host keys against a temp known_hosts, no password
ever) that the product reads through ITERA_SSH_CONFIG, exactly as it would read
the user's ~/.ssh/config. The far side's sessions run THIS repo's python
(`SetEnv PATH=... PYTHONPATH=...` in sshd_config), so `python3 -m tui.cli` there is
the code under test.

`Sshd.kill()` ends every sshd process (the listener and its per-connection
children, by pid) but nothing the sessions started: a detached far engine keeps
running, as on a box whose link dropped. `Sshd.start()` brings it back on the same
port. The fixture ends it by pid whatever the outcome.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from venvkit import make_venv

REPO = Path(__file__).resolve().parent.parent
SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
ALIAS = "box2"  # the Host alias the client config gives the sshd
CLOSED_ALIAS = "deadbox"  # a Host alias whose port nothing listens on


def have_sshd() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh") is not None and \
        shutil.which("rsync") is not None


needs_sshd = pytest.mark.skipif(not have_sshd(), reason="needs openssh-server, "
                                "openssh-client and rsync (.ci/run installs them)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def default_far_env() -> dict[str, str]:
    """The far sessions' environment: this interpreter first on PATH, this repo importable."""
    bindir = os.path.dirname(sys.executable)
    return {"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(REPO)}


def far_env_without_itera(root: Path) -> dict[str, str]:
    """A far side whose python3 cannot import itera-tui: a bare venv first on PATH."""
    python = make_venv(root / "bare-venv")
    return {"PATH": f"{python.parent}:/usr/bin:/bin"}


def keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "itera-test",
                    "-f", str(path)], check=True, timeout=30)


@dataclass
class Sshd:
    """One sshd and the client files that reach it."""

    root: Path
    far_env: dict[str, str] = field(default_factory=default_far_env)
    alias: str = ALIAS  # the Host alias its ssh_config gives it
    port: int = 0
    proc: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        self.closed_port = free_port()
        # a short private dir: unix socket paths are limited to ~104 characters
        self.control_dir = Path(tempfile.mkdtemp(prefix="itc-"))
        keygen(self.root / "host_key")
        keygen(self.root / "client_key")
        (self.root / "authorized_keys").write_text((self.root / "client_key.pub").read_text())
        host_pub = (self.root / "host_key.pub").read_text().split()
        (self.root / "known_hosts").write_text(
            f"[127.0.0.1]:{self.port} {host_pub[0]} {host_pub[1]}\n")
        # the far sessions get their own HOME: the user's real dotfiles (a ~/.bashrc
        # that puts another python first on PATH) stay out of the test
        home = self.root / "home"
        home.mkdir(exist_ok=True)
        far = {"HOME": str(home), **self.far_env}
        setenv = " ".join(f"{k}={v}" for k, v in far.items())
        (self.root / "sshd_config").write_text(f"""\
Port {self.port}
ListenAddress 127.0.0.1
HostKey {self.root / 'host_key'}
PidFile none
AuthorizedKeysFile {self.root / 'authorized_keys'}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
PermitUserEnvironment no
SetEnv {setenv}
LogLevel VERBOSE
Subsystem sftp internal-sftp
""")
        common = f"""\
  HostName 127.0.0.1
  User {os.environ.get('USER') or psutil.Process().username()}
  IdentityFile {self.root / 'client_key'}
  IdentitiesOnly yes
  UserKnownHostsFile {self.root / 'known_hosts'}
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
  PasswordAuthentication no
  KbdInteractiveAuthentication no
  BatchMode yes
  LogLevel ERROR
"""
        (self.root / "ssh_config").write_text(
            f"Host {self.alias}\n  Port {self.port}\n{common}"
            f"Host {CLOSED_ALIAS}\n  Port {self.closed_port}\n{common}"
            f"Host 127.0.0.1\n{common}")

    # -- what the product under test is given --------------------------------------

    @property
    def config(self) -> Path:
        return self.root / "ssh_config"

    @property
    def client_env(self) -> dict[str, str]:
        """Environment for the product's processes (CLI, engine) on the first box."""
        return {"ITERA_SSH_CONFIG": str(self.config),
                "ITERA_SSH_CONTROL_DIR": str(self.control_dir)}

    def settings(self):
        from tui.remote.ssh import SshSettings
        return SshSettings(config_file=self.config, control_dir=self.control_dir,
                           connect_timeout_s=5)

    def ssh(self, destination: str | None = None):
        from tui.remote.ssh import connect
        return connect(destination or self.alias, self.settings())

    # -- life ------------------------------------------------------------------------

    def start(self, timeout: float = 20.0) -> None:
        """Start sshd (-D: no daemon, -e: log to stderr) and wait until a login works."""
        if self.proc is not None and self.proc.poll() is None:
            return
        if not os.path.isdir("/run/sshd"):  # its privilege-separation directory
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        log = open(self.root / "sshd.log", "ab")
        try:
            self.proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(self.root / "sshd_config")],
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         start_new_session=True)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sshd exited {self.proc.returncode}:\n{self.log_tail()}")
            probe = subprocess.run(["ssh", "-F", str(self.config), "-o", "ControlMaster=no",
                                    "-o", "ControlPath=none", self.alias, "true"],
                                   capture_output=True, timeout=15)
            if probe.returncode == 0:
                return
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"sshd not ready in {timeout:.0f}s:\n{self.log_tail()}")

    def sshd_pids(self) -> list[int]:
        """The listener and every sshd process under it (one per connection)."""
        if self.proc is None:
            return []
        try:
            top = psutil.Process(self.proc.pid)
            kids = [p for p in top.children(recursive=True) if _is_sshd(p)]
        except psutil.NoSuchProcess:
            return []
        return [self.proc.pid, *(p.pid for p in kids)]

    def kill(self) -> None:
        """The link drops: SIGKILL every sshd process by pid, nothing the sessions started."""
        for pid in self.sshd_pids():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                pass

    def stop(self) -> None:
        """End it for good: masters first (so no client lingers), then sshd by pid."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.ssh().close(timeout_s=5)
            except Exception:  # noqa: BLE001 - teardown goes on whatever happens
                pass
        self.kill()
        shutil.rmtree(self.control_dir, ignore_errors=True)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return (self.root / "sshd.log").read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def joined_config(path: Path, *servers: Sshd) -> Path:
    """One ssh_config that reaches several test sshds (each by its own alias)."""
    path.write_text("".join(f"Include {s.config}\n" for s in servers))
    return path


def _is_sshd(proc: psutil.Process) -> bool:
    try:
        return proc.name() == "sshd" or os.path.basename(proc.exe()) == "sshd"
    except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
        return False


@pytest.fixture
def sshd(tmp_path):
    """A started sshd as the second box; ended by pid whatever the test's outcome."""
    if not have_sshd():
        pytest.skip("needs openssh-server, openssh-client and rsync (.ci/run installs them)")
    server = Sshd(tmp_path / "sshd")
    try:
        server.start()
        yield server
    finally:
        server.stop()
