"""With `[store]`, the wrap-up starts early enough for the bundle to reach the store
and verify there before the window ends (the store's rate measured by the mirror),
and a store too slow for the time left is one `store_at_risk` warning and notice.
A real S3 API (moto's server, throttled by a TCP proxy); the headless engine."""

from __future__ import annotations

import datetime as dt

import pytest

from conftest import needs, run_cli
from enginekit import printer_cmd, write_plan
from storekit import aws_env, s3  # noqa: F401  (s3: the fixture)
from tui.engine import read_ledger

pytestmark = [needs("s3fs", "moto"), pytest.mark.slow]


def campaign(root, endpoint: str, ends_in_s: float, bundle_mb: float, steps: int = 3000):
    root.mkdir()
    start = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=3600 - ends_in_s)
    path = write_plan(root, f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--steps", str(steps), "--sleep", "0.05")}
minutes = 30
""", extra=f"""
[window]
start = {start.strftime("%Y-%m-%dT%H:%M:%SZ")}

[store]
url = "s3://camp/team"
options = {{ endpoint_url = "{endpoint}" }}
bundle_mb = {bundle_mb}
""")
    path.write_text(path.read_text().replace('metric = "acc"\n',
                                             'metric = "acc"\nwrapup_hours = 0.002\n'))
    return path


def test_the_wrapup_starts_early_enough_to_deliver_before_the_window_ends(s3, tmp_path):
    s3.make_bucket("camp")
    s3.throttle(1_000_000)
    # lead: 7 s wrap-up + 1.5 x (2 x 5 MB at ~1 MB/s) + 60 s = about 82 s before the end
    path = campaign(tmp_path / "camp", s3.endpoint, ends_in_s=110, bundle_mb=5)
    out = run_cli("run", "--headless", str(path), cwd=path.parent, env=aws_env(), timeout=400)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    ledger = read_ledger(path.parent / ".itera/ledger.jsonl")
    window_end = next(e["end"] for e in ledger if e["event"] == "window_started")
    started = next(e for e in ledger if e["event"] == "wrapup_started")
    stop = next(e for e in ledger if e["event"] == "run_stop_requested")
    delivered = next(e for e in ledger if e["event"] == "store_delivered")
    assert stop["by"] == "wrapup"  # the run was still going: stopped for the delivery
    assert window_end - started["t"] >= 60  # started ahead of the end, not at it
    assert delivered["verified"] and delivered["t"] < window_end  # in time, verified there
    assert not [e for e in ledger if e["event"] == "store_at_risk"]


def test_a_store_too_slow_for_the_time_left_is_one_warning(s3, tmp_path):
    s3.make_bucket("camp")
    s3.throttle(1_000_000)
    path = campaign(tmp_path / "camp", s3.endpoint, ends_in_s=300, bundle_mb=2000, steps=400)
    out = run_cli("run", "--headless", "--no-wrapup", str(path), cwd=path.parent,
                  env=aws_env(), timeout=120)
    ledger = read_ledger(path.parent / ".itera/ledger.jsonl")
    risks = [e for e in ledger if e["event"] == "store_at_risk"]
    assert len(risks) == 1, out.stdout[-2000:]
    assert "extend the rental" in risks[0]["message"]
    assert "delivery is at risk" in out.stdout
