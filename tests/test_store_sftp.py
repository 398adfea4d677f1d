"""A real sftp store: the sshd on 127.0.0.1 the multi-box tests start (tests/sshkit.py),
reached through fsspec's sftp (sshfs/asyncssh) with the key and known_hosts where
those libraries look (~/.ssh of the test's own HOME): the ledger and the run logs
mirrored, the bundle delivered and verified there, `itera-tui verify sftp://...`."""

from __future__ import annotations

import os
import shutil
import time

import psutil
import pytest

from conftest import needs, run_cli
from enginekit import control_only, printer_cmd, step_to_the_end, write_plan
from sshkit import sshd  # noqa: F401  (the fixture)
from tui.campaign import load_plan
from tui.engine import Engine, read_ledger
from tui.session import CampaignSession
from tui.store import open_store, part_of, read_index, read_ledger as stored_ledger

pytestmark = [needs("sshfs", "asyncssh"), pytest.mark.slow]


def test_a_campaign_is_mirrored_and_delivered_to_an_sftp_store(sshd, tmp_path,  # noqa: F811
                                                               monkeypatch):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    shutil.copy(sshd.root / "client_key", home / ".ssh/id_ed25519")
    os.chmod(home / ".ssh/id_ed25519", 0o600)
    shutil.copy(sshd.root / "known_hosts", home / ".ssh/known_hosts")
    monkeypatch.setenv("HOME", str(home))
    user = os.environ.get("USER") or psutil.Process().username()
    url = f"sftp://{user}@127.0.0.1:{sshd.port}{tmp_path}/far/store"
    root = tmp_path / "camp"
    root.mkdir()
    path = write_plan(root, control_only(printer_cmd("--steps", "30")),
                      extra=f'\n[store]\nurl = "{url}"\n')
    plan = load_plan(path)
    session = CampaignSession(plan, Engine(plan, poll_interval=0.05), poll_interval=0.05)
    session.open()
    try:
        step_to_the_end(session, 60)
        progress = session.wrapup()
        assert progress.ok, progress.lines
        assert session.mirror.wait_caught_up(30), session.mirror.status()
        status = session.store_status()
    finally:
        session.close()
    assert status.bundle is not None and status.bundle.verified, status
    store = open_store(url)
    part = part_of(plan)
    index = read_index(store, part)
    assert {o.kind for o in index.objects} >= {"plan", "log"}
    local = (root / ".itera/ledger.jsonl").read_bytes()
    assert local.startswith(stored_ledger(store, part))
    far = tmp_path / "far/store" / part
    assert (far / "bundle/manifest.json").is_file()
    assert not list(far.rglob("*.part"))  # a file appears under its name only whole
    delivered = [e for e in read_ledger(root / ".itera/ledger.jsonl")
                 if e["event"] == "store_delivered"]
    assert delivered[-1]["verified"]
    env = {"HOME": str(home)}
    ok = run_cli("verify", f"{url}/{part}/bundle", cwd=tmp_path, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    (far / "bundle/report.md").write_text("altered\n")
    bad = run_cli("verify", f"{url}/{part}/bundle", cwd=tmp_path, env=env)
    assert bad.returncode == 1 and "FAIL report.md" in bad.stdout
