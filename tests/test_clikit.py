"""The in-process command line (tests/clikit.py) reads as a real one and leaves the
test's process as it found it, whatever the command did or raised."""

import logging
import os
import signal
import sys
import time

import pytest

from clikit import cli
from conftest import REPO


def test_argparse_exits_become_exit_statuses(tmp_path):
    helped = cli("check", "--help")
    assert helped.returncode == 0 and "usage: itera-tui check" in helped.stdout
    wrong = cli("check", "--no-such-flag", str(tmp_path / "campaign.toml"))
    assert wrong.returncode == 2 and "unrecognized arguments" in wrong.stderr


def test_cwd_and_env_are_the_calls_own(tmp_path, monkeypatch):
    """The command runs from `cwd` with `env` added, and only for the call."""
    monkeypatch.delenv("ITERA_CLIKIT_PROBE", raising=False)
    monkeypatch.setenv("PYTHONPATH", "/elsewhere")
    seen = {}

    def main(argv):
        seen["cwd"], seen["probe"] = os.getcwd(), os.environ.get("ITERA_CLIKIT_PROBE")
        seen["path"] = os.environ["PYTHONPATH"].split(os.pathsep)
        print("out")
        print("err", file=sys.stderr)
        return 3

    monkeypatch.setattr("tui.cli.main", main)
    here = os.getcwd()
    ran = cli("status", cwd=tmp_path, env={"ITERA_CLIKIT_PROBE": "1"})
    assert (ran.returncode, ran.stdout, ran.stderr) == (3, "out\n", "err\n")
    # a process the command starts imports this checkout first, as under run_cli
    assert seen == {"cwd": str(tmp_path), "probe": "1", "path": [str(REPO), "/elsewhere"]}
    assert os.getcwd() == here and "ITERA_CLIKIT_PROBE" not in os.environ
    assert os.environ["PYTHONPATH"] == "/elsewhere"


@pytest.mark.parametrize("ending", ["returns", "raises", "exits"])
def test_what_a_command_changes_of_the_process_is_put_back(tmp_path, monkeypatch, ending):
    here, tz = os.getcwd(), os.environ.get("TZ")
    term, root = signal.getsignal(signal.SIGTERM), logging.getLogger()
    streams, level, handlers, mask = (sys.stdin, sys.stdout, sys.stderr), root.level, \
        list(root.handlers), os.umask(0o022)
    os.umask(mask)

    def main(argv):
        os.chdir(tmp_path)
        os.environ["TZ"] = "Asia/Kathmandu"
        time.tzset()
        os.environ["HF_HUB_OFFLINE"] = "1"
        signal.signal(signal.SIGTERM, lambda *a: None)
        sys.stdout = sys.stderr = sys.stdin = None
        logging.basicConfig(level=logging.DEBUG, force=True)
        os.umask(0o177)
        if ending == "raises":
            raise RuntimeError("a command's bug")
        if ending == "exits":
            sys.exit("a message")
        return 0

    monkeypatch.setattr("tui.cli.main", main)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    if ending == "raises":
        with pytest.raises(RuntimeError):
            cli("status")
    else:
        ran = cli("status")
        assert ran.returncode == (1 if ending == "exits" else 0)
        assert ran.stderr == ("a message\n" if ending == "exits" else "")
    assert os.getcwd() == here and os.environ.get("TZ") == tz
    assert "HF_HUB_OFFLINE" not in os.environ
    assert time.tzname != ("+0545", "+0545")  # the zone read again from the old TZ
    assert signal.getsignal(signal.SIGTERM) is term
    assert (sys.stdin, sys.stdout, sys.stderr) == streams
    assert (root.level, root.handlers) == (level, handlers)
    assert os.umask(mask) == mask


def test_stdin_is_no_terminal_and_empty(monkeypatch):
    seen = {}

    def main(argv):
        seen["tty"], seen["text"] = sys.stdin.isatty(), sys.stdin.read()
        return 0

    monkeypatch.setattr("tui.cli.main", main)
    cli("decide")
    assert seen == {"tty": False, "text": ""}
