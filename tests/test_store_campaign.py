"""A campaign with `[store]` against a real S3 API (moto's server on 127.0.0.1, s3fs
pointed at it with `endpoint_url`): the ledger and every verified checkpoint in the
store within seconds of being recorded, the bundle delivered and verified at the
store, `itera-tui verify s3://...` from another folder, a store down mid-campaign,
and no secret from the environment anywhere the campaign writes or stores."""

from __future__ import annotations

import hashlib
import os
import json
import time
from pathlib import Path

import pytest

from clikit import cli
from conftest import needs, run_cli
from enginekit import script_cmd, step_until, write_plan
from storekit import KEY_ID, SECRET, aws_env, s3  # noqa: F401  (s3: the fixture)
from tui.campaign import load_plan
from tui.engine import read_ledger
from tui.session import CampaignSession
from tui.store import open_store, part_of, read_index, read_ledger as stored_ledger

pytestmark = [needs("s3fs", "moto", "torch"), pytest.mark.slow]


def campaign(root: Path, endpoint: str, steps: int = 80, sleep: float = 0.03) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return write_plan(root, f"""
[[variant]]
id = "control"
category = "mandatory"
command = {script_cmd("ckpt_printer.py", "--steps", str(steps), "--sleep", str(sleep))}
minutes = 1
""", extra=f"""
[store]
url = "s3://camp/team"
options = {{ endpoint_url = "{endpoint}" }}
""")


def session_for(path: Path) -> CampaignSession:
    from tui.engine import Engine

    plan = load_plan(path)
    return CampaignSession(plan, Engine(plan, poll_interval=0.05), poll_interval=0.05)


def store_files(s3server) -> dict[str, bytes]:
    fs = s3server.fs()
    return {key: fs.cat(key) for key in fs.find("camp")}


def test_ledger_checkpoints_and_bundle_reach_the_store_and_verify_there(s3, tmp_path,
                                                                          monkeypatch):
    s3.make_bucket("camp")
    monkeypatch.setenv("ITERA_CHECKPOINT_AT", "10,30")
    path = campaign(tmp_path / "camp", s3.endpoint)
    plan = load_plan(path)
    part = part_of(plan)
    store = open_store(plan.store)
    latencies = []
    session = session_for(path).open()
    try:
        seen: set[str] = set()

        def stored_soon(snap):
            for run in snap.state.runs:
                for verdict in run.verified:
                    if verdict.ok and verdict.path not in seen:
                        seen.add(verdict.path)
                        t0 = time.monotonic()
                        key = f"{part}/checkpoints/{run.id}/{verdict.path}"
                        while time.monotonic() - t0 < 20:  # in the store, and in its index
                            index = read_index(store, part)
                            if index is not None and index.object(key) is not None:
                                break
                            time.sleep(0.1)
                        latencies.append(time.monotonic() - t0)
            return snap.engine.finished and len(seen) >= 2

        step_until(session, stored_soon, 90, what="two verified checkpoints and the end")
        progress = session.wrapup()
        assert progress.ok, progress.lines
        assert session.mirror.wait_caught_up(30), session.mirror.status()
        status = session.store_status()
    finally:
        session.close()
    assert len(latencies) >= 2 and max(latencies) < 20, latencies  # within seconds
    assert status.bundle is not None and status.bundle.verified
    assert "off-box:" in status.text() and "bundle verified at the store" in status.text()

    index = read_index(store, part)
    local = (tmp_path / "camp/.itera/ledger.jsonl").read_bytes()
    assert local.startswith(stored_ledger(store, part))  # the last engine_stopped may lag
    assert len(stored_ledger(store, part)) >= len(local) - 400
    ckpts = index.of_kind("checkpoint")
    assert len(ckpts) >= 2
    for obj in ckpts:  # the hash the ledger holds is the file's, and the store's
        assert hashlib.sha256((tmp_path / "camp" / obj.source).read_bytes()).hexdigest() \
            == obj.sha256
    ledger = read_ledger(tmp_path / "camp/.itera/ledger.jsonl")
    recorded = {e["key"]: e["sha256"] for e in ledger if e["event"] == "store_object"}
    assert all(recorded[o.key] == o.sha256 for o in ckpts)
    delivered = [e for e in ledger if e["event"] == "store_delivered"]
    assert delivered and delivered[-1]["verified"] is True

    # status and the ending say what is off the box and where the bundle verified
    shown = cli("status", str(path), cwd=tmp_path / "camp", env=aws_env())
    assert shown.returncode == 0, shown.stderr
    assert "off-box: " in shown.stdout and "objects" in shown.stdout
    assert f"bundle at the store: s3://camp/team/{part}/bundle (verified there)" in shown.stdout
    from tui.session.ending import ending_of

    state = session.engine.state
    lines = ending_of(load_plan(path), state, time.time()).lines()
    assert any(line.startswith("bundle at the store: s3://camp/team/") and "verified there"
               in line for line in lines), lines

    # verify from another folder, with nothing of the campaign there
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = aws_env() | {"ITERA_STORE_ENDPOINT": s3.endpoint}
    url = f"s3://camp/team/{part}/bundle"
    ok = run_cli("verify", url, cwd=elsewhere, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "VERIFIED at the store" in ok.stdout
    fetched = run_cli("fetch", url, str(elsewhere / "copy"), cwd=elsewhere, env=env)
    assert fetched.returncode == 0, fetched.stdout + fetched.stderr
    local_verify = run_cli("verify", str(elsewhere / "copy"), cwd=elsewhere, env=env,
                           timeout=300)
    assert local_verify.returncode == 0, local_verify.stdout + local_verify.stderr

    # one object altered at the store: the check fails, naming it
    fs = s3.fs()
    fs.pipe(f"camp/team/{part}/bundle/report.md", b"# altered\n")
    bad = run_cli("verify", url, cwd=elsewhere, env=env)
    assert bad.returncode == 1
    assert "FAIL report.md:" in bad.stdout and "NOT verified" in bad.stdout

    # no secret from the environment in .itera/, the outputs, the bundle, the logs, the store
    for file in (tmp_path / "camp").rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            assert SECRET.encode() not in data and KEY_ID.encode() not in data, file
    for key, data in store_files(s3).items():
        assert SECRET.encode() not in data and KEY_ID.encode() not in data, key
    for out in (ok, bad, fetched):
        assert SECRET not in out.stdout + out.stderr


DOWN_S = 60.0


def test_a_store_down_for_a_minute_slows_no_run_is_one_notice_and_is_caught_up(
        s3, tmp_path, monkeypatch):
    from notifykit import Receiver

    s3.make_bucket("camp")
    monkeypatch.setenv("ITERA_CHECKPOINT_AT", ",".join(str(i) for i in range(20, 4000, 150)))
    receiver = Receiver()
    path = campaign(tmp_path / "camp", s3.endpoint, steps=1900, sleep=0.05)
    path.write_text(path.read_text().replace("hours = 1\n", "hours = 4\n") + f"""
[notify]
urls = ["{receiver.url()}"]
on = ["store"]
""")
    plan = load_plan(path)
    part = part_of(plan)
    store = open_store(plan.store)
    session = session_for(path).open()

    def records(snap) -> int:
        return sum(v.records for v in snap.engine.live.values())

    try:
        snap = step_until(session, lambda s: len(s.state.runs) and s.state.runs[0].verified,
                          90, what="a first verified checkpoint")
        assert session.mirror.wait_caught_up(20)
        t0, r0 = time.monotonic(), records(snap)
        step_until(session, lambda s: time.monotonic() - t0 >= 8, 90, what="a rate before")
        before = (records(session.step()) - r0) / (time.monotonic() - t0)

        s3.down()
        down_t, r1 = time.monotonic(), records(session.step())
        verified_before = len(session.step().state.runs[0].verified)
        step_until(session, lambda s: time.monotonic() - down_t >= DOWN_S, timeout=DOWN_S + 30,
                   what="a minute with the store down")
        snap = session.step()
        during = (records(snap) - r1) / (time.monotonic() - down_t)
        assert len(snap.state.runs[0].verified) > verified_before  # checkpoints went on
        st = session.store_status()
        assert st.down_since is not None and not st.caught_up
        assert "store unreachable since" in st.text()
        s3.up()

        step_until(session, lambda s: s.engine.finished, timeout=240, what="the end")
        deadline = time.monotonic() + 90
        while not session.mirror.wait_caught_up(1) and time.monotonic() < deadline:
            session.step()
        final = session.step()
        status = session.store_status()
    finally:
        session.close()
        receiver.close()
    assert during >= 0.7 * before, (before, during)  # the runs did not wait for the store
    assert status.caught_up and status.down_since is None, status
    ledger = read_ledger(tmp_path / "camp/.itera/ledger.jsonl")
    downs = [e for e in ledger if e["event"] == "store_down"]
    ups = [e for e in ledger if e["event"] == "store_up"]
    assert len(downs) == 1 and len(ups) == 1 and ups[0]["down_s"] >= DOWN_S - 5
    assert any("unreachable" in w.message for w in final.state.warnings)
    store_notices = [n for n in receiver.notices() if "store" in n.get("title", "")]
    assert len(store_notices) == 1, receiver.titles()
    # caught up afterwards: each run's newest verified checkpoint is stored (the older
    # ones queued during the outage were replaced by it: resume continues from the newest)
    index = read_index(store, part)
    newest = {r.last_verified_checkpoint.path for r in final.state.runs
              if r.last_verified_checkpoint is not None}
    stored = {o.key.split("/", 3)[3] for o in index.of_kind("checkpoint")}
    assert newest and newest <= stored, (newest, stored)
    local = (tmp_path / "camp/.itera/ledger.jsonl").read_bytes()
    assert local.startswith(stored_ledger(store, part))


PROFILE_SECRET = "itera-profile-secret-Hw4pK9sX"  # only in the profile's credentials file
PROFILE_KEY_ID = "itera-profile-key-id"


def test_credentials_from_an_aws_profile_reach_the_store_and_appear_nowhere(s3, tmp_path):
    """`options = { profile = "..." }` names a profile in the shared credentials file, the
    way botocore reads it; the key and the secret are written nowhere the campaign writes,
    stores or prints (the environment holds no credential at all here)."""
    s3.make_bucket("camp")
    home = tmp_path / "home"
    (home / ".aws").mkdir(parents=True)
    credentials = home / ".aws/credentials"
    credentials.write_text(f"[itera]\naws_access_key_id = {PROFILE_KEY_ID}\n"
                           f"aws_secret_access_key = {PROFILE_SECRET}\n")
    env = {key: "" for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")} | {
        "AWS_SHARED_CREDENTIALS_FILE": str(credentials), "AWS_CONFIG_FILE": os.devnull,
        "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    root = tmp_path / "camp"
    path = campaign(root, s3.endpoint, steps=30, sleep=0.02)
    path.write_text(path.read_text().replace(
        f'options = {{ endpoint_url = "{s3.endpoint}" }}',
        f'options = {{ endpoint_url = "{s3.endpoint}", profile = "itera" }}'))
    run = run_cli("run", "--headless", str(path), cwd=root, env=env, timeout=400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    part = part_of(load_plan(path))
    shown = cli("status", str(path), cwd=root, env=env)
    assert f"s3://camp/team/{part}/bundle (verified there)" in shown.stdout, shown.stdout
    # the fetch command points at the store, in the last lines and in outputs/FETCH.txt
    store_line = (f"ITERA_STORE_ENDPOINT={s3.endpoint} itera-tui fetch "
                  f"s3://camp/team/{part}/bundle ./")
    assert (root / "outputs/FETCH.txt").read_text().startswith(store_line)
    assert f"fetch it: {store_line}" in run.stdout, run.stdout[-2000:]
    assert f"bundle at the store: s3://camp/team/{part}/bundle" in run.stdout
    report = (root / "outputs/bundle/report.md").read_text()  # what the person keeps
    assert f"itera-tui fetch s3://camp/team/{part}/bundle ./" in report
    assert s3.endpoint not in report  # the endpoint is the person's to give, not the file's
    for file in root.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            assert PROFILE_SECRET.encode() not in data and \
                PROFILE_KEY_ID.encode() not in data, file
    stored = store_files(s3)
    assert any(key.endswith("/bundle/manifest.json") for key in stored), sorted(stored)
    for key, data in stored.items():
        assert PROFILE_SECRET.encode() not in data and PROFILE_KEY_ID.encode() not in data, key
    for out in (run, shown):
        assert PROFILE_SECRET not in out.stdout + out.stderr
        assert PROFILE_KEY_ID not in out.stdout + out.stderr
