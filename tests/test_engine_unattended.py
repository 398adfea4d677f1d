"""A person can walk away: with no face open, the engine finishes the campaign.

The embedded demo, started from a control room in a real tmux pane: the room
is killed with SIGKILL during the checks, a second room's tmux window is
closed during the pilots, and with nobody watching the engine process still
stops the exploratory run by `non_finite`, launches the full runs, wraps up and
verifies the bundle. A room opened afterwards shows the ending; the conclusion
is the one its full runs logged. The full runs are a quarter as long as the
demo's (`demokit.short_demo`): the answer the whole demo reaches is
`test_demo_e2e`'s to pin, this test's is getting there with nobody watching.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import psutil
import pytest

from clikit import cli
from conftest import REPO, run_cli
from demokit import check_conclusion_from_runs, full_run, short_demo
from servicekit import end_engine, engine_pids, wait_until
from tui.campaign import load_plan
from tui.engine import read_ledger, replay
from tui.service.starter import connect

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500),
              pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")]


# a tmux server of this test process's own: a session a killed run left behind on a shared
# name ("duplicate session: camp") failed the next run, and two suites side by side collide
SOCKET = f"itera-test-{os.getpid()}"


def tmux(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["tmux", "-L", SOCKET, *args], capture_output=True, text=True,
                          timeout=30, check=check)


def room_pid(window: str) -> int | None:
    """The control room's python process inside a tmux window (None: not there yet)."""
    panes = tmux("list-panes", "-t", window, "-F", "#{pane_pid}", check=False).stdout.split()
    if not panes:
        return None
    try:
        proc = psutil.Process(int(panes[0]))
        for p in [proc, *proc.children(recursive=True)]:
            if "tui.cli" in " ".join(p.cmdline()):
                return p.pid
    except psutil.Error:
        return None
    return None


def events(root, kind=None):
    ledger = read_ledger(root / ".itera/ledger.jsonl") if (root / ".itera/ledger.jsonl"
                                                            ).exists() else []
    return [e for e in ledger if kind is None or e["event"] == kind]


def test_the_demo_ends_verified_with_no_face_open(tmp_path):
    root = tmp_path
    text = short_demo((REPO / "campaign.toml").read_text()).replace('decide = "ask"',
                                                                     'decide = "continue"')
    (root / "campaign.toml").write_text(text)
    shutil.copytree(REPO / "tui/demo/data", root / "tui/demo/data")
    env = f"PYTHONPATH={REPO} TEXTUAL_DRIVER=textual.drivers.headless_driver:HeadlessDriver"
    room = f"cd {root} && env {env} {sys.executable} -m tui.cli campaign.toml"
    try:
        # a session that outlives its rooms' windows (as a person's tmux does)
        tmux("new-session", "-d", "-s", "camp", "-x", "80", "-y", "24", "sleep 3600")
        tmux("new-window", "-t", "camp", "-n", "first", room)
        wait_until(lambda: engine_pids(root), 90, "the engine the room started")
        wait_until(lambda: events(root, "run_launched"), 90, "the first launch")
        pid = wait_until(lambda: room_pid("camp:first"), 30, "the room's process")
        psutil.Process(pid).kill()  # kill -9 the room during the checks
        wait_until(lambda: not psutil.pid_exists(pid) or
                   psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, 30, "the room gone")
        # a second room in a tmux window, closed by mistake during the pilots
        wait_until(lambda: [e for e in events(root, "run_launched") if e["kind"] == "pilot"],
                   300, "the pilots")
        tmux("new-window", "-t", "camp", "-n", "second", room)
        wait_until(lambda: room_pid("camp:second"), 60, "the second room")
        tmux("kill-window", "-t", "camp:second")
        # nobody watches now: the rules, the next runs and the wrap-up go on
        wrap = wait_until(lambda: events(root, "wrapup_done"), 900, "the wrap-up")
        assert wrap[-1]["verified"] is True
        state = replay(read_ledger(root / ".itera/ledger.jsonl"))
        fired = [e for e in events(root, "stop_rule_fired") if e["rule"] == "non_finite"]
        assert {e["run"].split("-")[0] for e in fired} == {"hot_lr"}
        full = {r.target for r in state.runs if r.kind == "run"}
        assert {"control", "wide"} <= full
        assert len(events(root, "engine_started")) == 1  # one engine drove it all
        verify = run_cli("verify", str(root / "outputs/bundle"), cwd=root, timeout=300)
        assert verify.returncode == 0, verify.stdout + verify.stderr
        # the conclusion its full runs logged (the whole demo's answer: test_demo_e2e)
        status = json.loads(cli("status", "--json", str(root / "campaign.toml"),
                                cwd=root).stdout)
        check_conclusion_from_runs(status, {v: root / ".itera/runs" / full_run(state, v).id
                                            for v in ("control", "wide")})
        # the room reopened afterwards shows the ending
        client = connect(load_plan(root / "campaign.toml"), start=True, name="room")
        try:
            snap = wait_until(lambda: (lambda s: s if s.ending is not None else None)(
                client.step()), 60, "the ending")
            assert snap.phase == "done" and snap.ending.verified is True
            assert snap.ending.verdict.kind == "no"
        finally:
            client.close()
    finally:
        tmux("kill-server", check=False)
        end_engine(root)
