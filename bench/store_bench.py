"""Store bench: what the off-box store costs, each figure beside its bare baseline.

    python bench/store_bench.py [--quick] [--json]

Against a real S3 API on 127.0.0.1 (moto's server, started here, ended by pid):

- NaN stop latency with the mirror on vs off: real runs write a NaN loss at a
  random moment; the latency is that record's time to the SIGTERM the engine
  sends (ledger). Mirroring runs on its own thread (ledger ranges every second,
  logs, index). The latency is spread evenly over the engine's 50 ms poll (where
  the NaN falls between two reads: 1 to 64 ms measured), so a median of a dozen
  stops moved by +-5 ms between runs and a ratio of medians said 0.8x to 1.7x of
  the same code. The figure is the mean of 36 stops a side (its standard error
  about 2.5 ms) and the goal what mirroring adds to it: <= 10 ms, a fifth of the
  poll (the ratio is printed beside it).
- Delivering a bundle (200 MB; --quick 40 MB) vs a bare `fs.put(recursive=True)` of
  the same files to the same store. Goal <= 1.15x.
- Verifying it at the store (every file read back and hashed) vs a bare `fs.get`
  of the same files plus hashing them. Goal <= 1.15x.
Rounds alternate the measured and the baseline; the transfer figures are medians of 5.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from bench.engine_bench import NAN_SCRIPT as _ENGINE_NAN, nan_campaign  # noqa: E402

# the engine bench's NaN run, its NaN a little later (2-4 s, not 0.3-1.2 s): the mirror's
# start (index read, first ledger range, the plan) is one-time, the steady state is the case
NAN_SCRIPT = _ENGINE_NAN.replace("random.uniform(0.3, 1.2)", "random.uniform(2.0, 4.0)")
assert NAN_SCRIPT != _ENGINE_NAN
from bench.figures import Figure, ratio_figure, report  # noqa: E402


ADDED_S = 0.010  # what mirroring may add to the mean stop latency: a fifth of the 50 ms poll


def added_figure(name: str, value: float, baseline: float, unit: str, most: float) -> Figure:
    """A figure whose goal is what it adds to its baseline, not a ratio (see the module's
    docstring: the ratio of two latencies spread over the poll is mostly the poll's noise)."""
    return Figure(name, value, baseline, unit, f"<= +{most * 1000:.0f} ms",
                  value - baseline <= most)


def _campaign(root: Path, runs: int, store: str | None) -> Path:
    extra = f'\n[store]\nurl = "{store}"\noptions = {{ endpoint_url = "{ENDPOINT}" }}\n' \
        if store else ""
    return nan_campaign(root, runs, NAN_SCRIPT, extra)


ENDPOINT = ""


def stop_latencies(runs: int, store: str | None, poll: float = 0.05) -> list[float]:
    from tui.campaign import load_plan
    from tui.engine import Engine, read_ledger
    from tui.session import CampaignSession

    with tempfile.TemporaryDirectory() as tmp:
        path = _campaign(Path(tmp), runs, store)
        plan = load_plan(path)
        session = CampaignSession(plan, Engine(plan, poll_interval=poll), poll_interval=poll)
        session.open()
        try:
            while not session.engine.finished:
                session.step()
                time.sleep(poll)
            if session.mirror is not None:
                session.mirror.wait_caught_up(20)
        finally:
            session.close()
        ledger = read_ledger(path.parent / ".itera" / "ledger.jsonl")
        fired = {e["run"]: e["record_t"] for e in ledger if e["event"] == "stop_rule_fired"}
        sent = {e["run"]: e["t"] for e in ledger if e["event"] == "run_stop_requested"}
        return [sent[r] - fired[r] for r in fired if r in sent]


def make_bundle(root: Path, total: int, files: int = 4) -> Path:
    bundle = root / "bundle"
    bundle.mkdir()
    entries = []
    block = os.urandom(1 << 20)
    for i in range(files):
        rel = f"runs/r{i}/model.bin"
        (bundle / rel).parent.mkdir(parents=True)
        digest = hashlib.sha256()
        with open(bundle / rel, "wb") as out:
            for _ in range(total // files >> 20):
                out.write(block)
                digest.update(block)
        entries.append({"path": rel, "bytes": (bundle / rel).stat().st_size,
                        "sha256": digest.hexdigest(), "kind": "artifact"})
    (bundle / "manifest.json").write_text(json.dumps({"files": entries, "runs": []}))
    return bundle


def bare_get_and_hash(fs, remote: str, dest: Path) -> float:
    t0 = time.perf_counter()
    fs.get(remote, str(dest), recursive=True)
    for path in sorted(dest.rglob("*")):
        if path.is_file():
            digest = hashlib.sha256()
            with open(path, "rb") as fh:
                while block := fh.read(8 << 20):
                    digest.update(block)
    return time.perf_counter() - t0


def main() -> None:
    global ENDPOINT
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="6 runs a round, a 40 MB bundle")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    # stops: 6 rounds of `runs` a side (36 with --quick); transfers: 5 rounds a side
    runs, size, stop_rounds, rounds = (6, 40 << 20, 6, 5) if args.quick else \
        (12, 200 << 20, 6, 5)

    from storekit import S3Server, aws_env

    os.environ.update(aws_env())
    with tempfile.TemporaryDirectory() as tmp:
        server = S3Server(Path(tmp))
        try:
            server.start()
            ENDPOINT = server.endpoint
            server.make_bucket("bench")
            off, on = [], []
            for i in range(stop_rounds):  # alternating which goes first
                order = (None, f"s3://bench/stop{i}") if i % 2 == 0 else \
                    (f"s3://bench/stop{i}", None)
                for store_url in order:
                    (on if store_url else off).extend(stop_latencies(runs, store_url))
            from tui.store import open_store
            from tui.store.deliver import deliver_bundle, verify_at

            bundle = make_bundle(Path(tmp), size)
            store = open_store("s3://bench/deliver", {"endpoint_url": ENDPOINT})
            fs = store.fs
            fs.ls("bench")  # the connection and the session, before any timing
            up, put, ver, get = [], [], [], []

            def ours(i):
                check = deliver_bundle(store, f"d{i}", bundle)
                assert check.verified, check.failures
                up.append(check.upload_s)
                t0 = time.perf_counter()
                assert verify_at(store, f"d{i}").verified
                ver.append(time.perf_counter() - t0)

            def bare(i):
                t0 = time.perf_counter()
                fs.put(str(bundle) + "/", store.path(f"p{i}"), recursive=True)
                put.append(time.perf_counter() - t0)
                get.append(bare_get_and_hash(fs, store.path(f"p{i}"), Path(tmp) / f"g{i}"))

            for i in range(rounds + 1):  # round 0 warms moto's buckets up: not counted
                for fn in ((ours, bare) if i % 2 == 0 else (bare, ours)):
                    fn(i)
                if i == 0:
                    up.clear(), put.clear(), ver.clear(), get.clear()
        finally:
            server.stop()
    mb = size >> 20
    figures = [
        added_figure("NaN stop latency, mirroring on vs off (mean)", statistics.mean(on),
                     statistics.mean(off), "s", ADDED_S),
        ratio_figure(f"deliver a {mb} MB bundle vs bare fsspec put", statistics.median(up),
                     statistics.median(put), "s", "<= 1.15x"),
        ratio_figure("verify it at the store vs bare get + sha256", statistics.median(ver),
                     statistics.median(get), "s", "<= 1.15x"),
    ]
    added_ms = 1000 * (statistics.mean(on) - statistics.mean(off))
    print(f"note: store bench: {len(on)}+{len(off)} stops (mirroring adds {added_ms:+.1f} ms), "
          f"{mb} MB bundle, {rounds} rounds, "
          f"moto server on 127.0.0.1, load {os.getloadavg()[0]:.2f}", file=sys.stderr)
    report(figures, args.json)


if __name__ == "__main__":
    main()
