"""Every way of starting a campaign refuses what `check` refuses (issue 36, item 1).

A variant whose script does not exist fails in every pilot and every run:
`check` exits 2 on it with one line. The room (`itera-tui`), `run --headless`,
`engine start` and a far box's `attach --stdio --start` (what `--host` runs over
ssh) print that same line, exit 2, and leave nothing behind: no frozen plan, no
ledger, no engine process.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from clikit import cli
from servicekit import end_engine, engine_processes, env_with
from sshkit import ALIAS, needs_sshd, sshd  # noqa: F401 - sshd is a fixture

PLAN = """
[campaign]
name = "typo"
question = "does the typo start?"
metric = "acc"
control = "control"

[[lot]]
gpu = "cpu"
hours = 1
price_usd = 1.0

[metrics]
acc = 'acc=(\\S+)'

[[variant]]
id = "control"
category = "mandatory"
command = ["python", "trian.py"]
minutes = 1
"""


def _typo_campaign(root):
    root.mkdir(parents=True, exist_ok=True)
    (root / "train.py").write_text("print('acc=1.0')\n")
    path = root / "campaign.toml"
    path.write_text(PLAN)
    return path


def _refusal(root) -> str:
    checked = cli("check", str(root / "campaign.toml"), cwd=root)
    assert checked.returncode == 2, checked.stdout + checked.stderr
    line = checked.stderr.strip()
    assert "trian.py" in line and "did you mean" in line.lower() and "\n" not in line, line
    return line


def _nothing_started(root) -> None:
    assert not (root / ".itera" / "plan.toml").exists()
    assert not (root / ".itera" / "ledger.jsonl").exists()
    assert engine_processes(root) == []


@pytest.mark.slow
@pytest.mark.parametrize("argv", [[], ["run"], ["run", "--headless"], ["engine", "start"]],
                         ids=["room", "run", "headless", "engine-start"])
def test_each_start_refuses_what_check_refuses_in_its_words(tmp_path, argv):
    root = tmp_path / "camp"
    path = _typo_campaign(root)
    line = _refusal(root)
    try:
        done = subprocess.run([sys.executable, "-m", "tui.cli", *argv, str(path)], cwd=root,
                              env=env_with(), stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=90)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.strip() == line
        _nothing_started(root)
    finally:
        end_engine(root)


@pytest.mark.slow
def test_attach_start_answers_the_refusal_as_the_protocol_s_error_line(tmp_path):
    root = tmp_path / "camp"
    _typo_campaign(root)
    line = _refusal(root)
    try:
        done = subprocess.run([sys.executable, "-m", "tui.cli", "attach", "--stdio", "--start",
                               str(root)], env=env_with(), stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, timeout=90)
        assert done.returncode == 2, done.stdout + done.stderr
        answer = json.loads(done.stdout.splitlines()[0])
        assert answer["op"] == "error"
        assert f"itera-tui: {answer['message']}" == line
        _nothing_started(root)
    finally:
        end_engine(root)


@needs_sshd
@pytest.mark.slow
def test_a_room_with_host_refuses_a_far_plan_check_refuses(sshd, tmp_path):  # noqa: F811
    root = sshd.root / "home" / "typo"
    _typo_campaign(root)
    line = _refusal(root)
    env = env_with(**sshd.client_env,
                   ITERA_REMOTE_COMMAND=f"{sys.executable} -m tui.cli")
    try:
        done = subprocess.run([sys.executable, "-m", "tui.cli", "--host", f"{ALIAS}:{root}"],
                              env=env, stdin=subprocess.DEVNULL, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 2, done.stdout + done.stderr
        assert done.stderr.strip() == line
        _nothing_started(root)
    finally:
        end_engine(root)
