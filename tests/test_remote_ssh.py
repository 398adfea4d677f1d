"""tui.remote.ssh against a real OpenSSH server on 127.0.0.1 (tests/sshkit.py)."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

from enginekit import wait_for
from sshkit import CLOSED_ALIAS, needs_sshd, sshd  # noqa: F401 - sshd is a fixture
from tui.remote.ssh import (Destination, DestinationError, Ssh, SshSettings, parse_destination,
                            private_runtime_dir, run_bounded)


# -- the destination as a renter writes it --------------------------------------------

@pytest.mark.parametrize("text, host, user, port, options", [
    ("gpu2", "gpu2", None, None, ()),
    ("root@203.0.113.7 -p 40022", "203.0.113.7", "root", 40022, ()),
    ("ssh root@203.0.113.7 -p40022", "203.0.113.7", "root", 40022, ()),
    ("-p 22 -l ubuntu box.example.org", "box.example.org", "ubuntu", 22, ()),
    ("ssh://me@10.0.0.5:2222", "10.0.0.5", "me", 2222, ()),
    ("gpu2 -i ~/.ssh/rented -o ProxyJump=bastion", "gpu2", None, None,
     ("-i", "~/.ssh/rented", "-o", "ProxyJump=bastion")),
])
def test_destination_is_split_into_its_parts(text, host, user, port, options):
    d = parse_destination(text)
    assert (d.host, d.user, d.port, d.options) == (host, user, port, options)
    assert d.text == text


@pytest.mark.parametrize("text, words", [
    ("", "destination is needed"),
    ("root@host -p 0", "not a port"),
    ("root@host -p", "needs a value"),
    ("host1 host2", "more than one host"),
    ("host -L 8080:localhost:80", "-L is not taken"),
    ("root@ -p 22", "not a host"),
    ("'unclosed", "cannot read"),
])
def test_a_destination_that_cannot_be_read_says_why(text, words):
    with pytest.raises(DestinationError, match=words):
        parse_destination(text)


def test_every_call_is_batch_mode_bounded_and_multiplexed(tmp_path):
    ssh = Ssh(parse_destination("root@203.0.113.7 -p 40022"),
              SshSettings(config_file=tmp_path / "cfg", control_dir=tmp_path))
    argv = ssh.argv(["echo", "a b"])
    joined = " ".join(argv)
    for option in ("BatchMode=yes", "ConnectTimeout=", "ServerAliveInterval=",
                   "ControlMaster=auto", f"ControlPath={tmp_path}/%C", "ControlPersist="):
        assert option in joined
    assert argv[argv.index("-F") + 1] == str(tmp_path / "cfg")
    assert argv[argv.index("-p") + 1] == "40022"
    assert argv[-3:] == ["root@203.0.113.7", "--", "echo 'a b'"]
    # no -F unless asked: the user's own ~/.ssh/config is what ssh reads
    assert "-F" not in Ssh(parse_destination("gpu2"), SshSettings(control_dir=tmp_path)).argv()
    # no host-key policy is set here: the user's config decides
    assert "StrictHostKeyChecking" not in joined


def test_the_control_sockets_live_in_a_private_directory(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    loose = tmp_path / f"itera-tui-ssh-{os.getuid()}"
    loose.mkdir(mode=0o755)
    os.chmod(loose, 0o755)
    path = private_runtime_dir()
    assert path == loose
    assert stat.S_IMODE(path.stat().st_mode) == 0o700


@pytest.mark.slow
def test_a_hung_command_is_ended_at_its_deadline_with_its_whole_group(tmp_path):
    marker = tmp_path / "child.pid"
    result = run_bounded(["sh", "-c", f"sleep 60 & echo $! > {marker}; wait"], timeout_s=1.5)
    assert result.timed_out and result.returncode is None and not result.ok
    assert result.reason() == "no answer before the deadline"
    child = int(marker.read_text())
    wait_for(lambda: not _alive(child), 10, what="the remote child ended")


@pytest.mark.slow
def test_a_missing_program_is_a_result_not_a_traceback():
    result = run_bounded(["/nonexistent/ssh", "x"], timeout_s=5)
    assert result.returncode is None and result.unreachable
    assert "cannot start /nonexistent/ssh" in result.reason()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[-1][0] != "Z"
    except FileNotFoundError:
        return False


# -- against the real sshd -------------------------------------------------------------

@pytest.mark.slow
@needs_sshd
def test_a_command_runs_on_the_far_side_with_one_master_connection(sshd):
    ssh = sshd.ssh()
    first = ssh.run(["python3", "-c", "import tui, sys; print(tui.__file__)"], timeout_s=30)
    assert first.ok, first
    assert first.stdout.strip().endswith("tui/__init__.py")
    sockets = list(sshd.control_dir.iterdir())
    assert len(sockets) == 1 and stat.S_ISSOCK(sockets[0].lstat().st_mode)
    check = subprocess.run(ssh.argv()[:-1] + ["-O", "check", ssh.destination.target],
                           capture_output=True, text=True, timeout=10)
    assert check.returncode == 0 and "Master running" in check.stderr
    second = ssh.run(["echo", "it's one argument; not two"], timeout_s=30)
    assert second.stdout == "it's one argument; not two\n"
    assert list(sshd.control_dir.iterdir()) == sockets
    script = ssh.run_script("echo \"$((6 * 7))\"\n", timeout_s=30)
    assert script.stdout.strip() == "42"


@pytest.mark.slow
@needs_sshd
def test_a_closed_port_is_unreachable_in_words_within_the_timeout(sshd):
    result = sshd.ssh(CLOSED_ALIAS).run(["true"], timeout_s=30)
    assert not result.ok and result.unreachable and not result.timed_out
    assert "refused" in result.reason().lower()


@pytest.mark.slow
@needs_sshd
def test_an_unknown_host_key_is_refused_without_a_prompt(sshd):
    (sshd.root / "known_hosts").write_text("")
    result = sshd.ssh().run(["true"], timeout_s=30)
    assert result.unreachable and not result.timed_out
    assert "host key verification failed" in result.stderr.lower()


@pytest.mark.slow
@needs_sshd
def test_the_link_drops_and_comes_back_on_the_same_port(sshd):
    ssh = sshd.ssh()
    assert ssh.run(["true"], timeout_s=30).ok
    port = sshd.port
    sshd.kill()
    assert sshd.sshd_pids() == [] or sshd.proc.poll() is not None
    lost = ssh.run(["true"], timeout_s=30)
    assert lost.unreachable, lost
    sshd.start()
    assert sshd.port == port
    back = ssh.run(["echo", "back"], timeout_s=30)
    assert back.ok and back.stdout == "back\n", back


@pytest.mark.slow
@needs_sshd
def test_rsync_copies_both_ways_and_finishes_a_torn_file(sshd, tmp_path):
    ssh = sshd.ssh()
    src = tmp_path / "campaign"
    (src / "data").mkdir(parents=True)
    (src / "campaign.toml").write_text("[campaign]\nname = 'x'\n")
    blob = os.urandom(300_000)
    (src / "data" / "corpus.bin").write_bytes(blob)
    (src / ".itera").mkdir()
    (src / ".itera" / "ledger.jsonl").write_text("{}\n")
    far = tmp_path / "far box" / "campaign"
    far.parent.mkdir()
    pushed = ssh.rsync(f"{src}/", ssh.remote_path(f"{far}/"), timeout_s=60,
                       excludes=("/.itera/",))
    assert pushed.ok, pushed
    assert (far / "data" / "corpus.bin").read_bytes() == blob
    assert not (far / ".itera").exists()
    # a torn earlier copy: the first half only; the next pull completes it
    back = tmp_path / "back"
    (back / "data").mkdir(parents=True)
    (back / "data" / "corpus.bin").write_bytes(blob[:150_000])
    pulled = ssh.rsync(ssh.remote_path(f"{far}/"), f"{back}/", timeout_s=60)
    assert pulled.ok, pulled
    assert (back / "data" / "corpus.bin").read_bytes() == blob
    missing = ssh.rsync(ssh.remote_path(f"{tmp_path}/nowhere/"), f"{back}/", timeout_s=60)
    assert not missing.ok and missing.reason()


def test_destination_label_reads_as_written():
    assert Destination(text="x", host="h", user="u", port=2).label == "u@h -p 2"
