"""`check --store` against a real S3 API throttled to a known rate (a TCP proxy in
front of moto that paces every byte): the delivery interval it puts in the calendar
is the bundle sent and read back at the rates it measured, and that is what the real
delivery then moves: the bytes the proxy counted each way, at those rates, come within
25 % of the plan. Counted, not timed: on a busy box the real delivery's wall time
moves with the load (moto and the proxy are Python processes), the bytes do not."""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import time
from pathlib import Path

import pytest

from conftest import needs, run_cli
from enginekit import printer_cmd, write_plan
from storekit import aws_env, s3  # noqa: F401  (s3: the fixture)

sys.path.insert(0, str(Path(__file__).parent / "scripts"))
from bundlekit import delivered_bundle  # noqa: E402

from tui.store import open_store  # noqa: E402
from tui.store.deliver import deliver_bundle  # noqa: E402

pytestmark = [needs("s3fs", "moto", "torch"), pytest.mark.slow]
RATE = 2_000_000  # bytes a second, each way


def bundle_of_known_size(tmp_path, tmp_path_factory) -> Path:
    campaign, result = delivered_bundle(tmp_path_factory)
    bundle = tmp_path / "bundle"
    shutil.copytree(campaign.parent / result.bundle_rel, bundle)
    blob = bytes(range(256)) * (24 << 10)  # 6 MiB of weights beside the small files
    (bundle / "extra").mkdir()
    (bundle / "extra/weights.bin").write_bytes(blob)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"].append({"path": "extra/weights.bin", "bytes": len(blob),
                              "sha256": hashlib.sha256(blob).hexdigest(), "kind": "artifact"})
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=2))
    return bundle


def test_check_store_plans_the_delivery_within_a_quarter_of_the_real_one(
        s3, tmp_path, tmp_path_factory):
    s3.make_bucket("camp")
    bundle = bundle_of_known_size(tmp_path, tmp_path_factory)
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    root = tmp_path / "camp"
    root.mkdir()
    path = write_plan(root, f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--steps", "5")}
minutes = 1
""", extra=f"""
[store]
url = "s3://camp/team"
options = {{ endpoint_url = "{s3.endpoint}" }}
bundle_mb = {size / 1e6:.6f}
""")
    s3.throttle(RATE)
    out = run_cli("check", "--store", "--json", str(path), cwd=root, env=aws_env(),
                  timeout=300)
    assert out.returncode in (0, 1), out.stderr
    summary = json.loads(out.stdout)
    planned_s = summary["store"]["delivery_hours"] * 3600
    entry = next(e for e in summary["calendar"] if e["kind"] == "retrieval")
    assert entry["label"] == "delivery to the store"
    assert abs(entry["hours"] * 3600 - planned_s) < 1.0
    assert summary["store"]["measured"]["write_mb_s"] < RATE / 1e6 * 1.1  # it was throttled

    store = open_store("s3://camp/team", {"endpoint_url": s3.endpoint})
    before = s3.moved()
    t0 = time.monotonic()
    check = deliver_bundle(store, "lot1/bundle", bundle)
    real_s = time.monotonic() - t0
    after = s3.moved()
    assert check.verified, check.failures
    up, down = (after[way] - before[way] for way in ("up", "down"))
    measured = summary["store"]["measured"]
    print("FIGURE check --store planned", round(planned_s, 2), "s, delivered in",
          round(real_s, 2), "s, moved", up, "up and", down, "down", measured)
    # the bundle went up once and was read back once (each file hashed at the store)
    assert size <= up <= size * 1.05 and size <= down <= size * 1.05, (size, up, down)
    # and the plan is those bytes at the rates `check` measured (beside its requests' latency)
    moved_s = up / 1e6 / measured["write_mb_s"] + down / 1e6 / measured["read_mb_s"]
    assert abs(planned_s - moved_s) <= 0.25 * moved_s, (planned_s, moved_s, measured)

    text = run_cli("check", "--store", str(path), cwd=root, env=aws_env(), timeout=300)
    assert "delivery of" in text.stdout and "measured: write" in text.stdout
