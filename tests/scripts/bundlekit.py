"""Helpers for the bundle tests: small real campaigns that deliver, driven to the end.

The campaigns run `deliver.py` through the real engine (real processes, real
ledger, real torch files for the reload check). Building the torch campaign
costs a few seconds, so `delivered_campaign` builds it once per test session
and hands out the same directory (tests copy it before changing anything).
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
import threading
import time
from pathlib import Path

DELIVER = Path(__file__).parent / "deliver.py"
_CACHE: dict[str, Path] = {}


def deliver_cmd(*args: str) -> str:
    """As a user writes it: relative to the campaign folder (write_campaign copies the
    script there), so no path of this machine, or of a temp dir, reaches the bundle."""
    return json.dumps(["python", DELIVER.name, *args])


def campaign_text(variants: str, extra: str = "", gpus: int = 2) -> str:
    """A 3-day RTX 4090 lot (catalog: 47.14 USD), one other expense, JSONL metrics."""
    head = f"""
        [campaign]
        name = "bundle-test"
        question = "Does the wide variant beat the control on acc?"
        metric = "acc"
        min_gain = 0.01
        link_mbps = 100
        retrieval_hours = 0.5

        [[lot]]
        gpu = "RTX 4090"
        days = 3
        gpus = {gpus}

        [[expense]]
        name = "object storage"
        usd = 4.5

        [deliverables]
        files = ["predictions.jsonl", "error_analysis.json"]
        unit = "corpus"

        [engine]
        grace_seconds = 2.0
    """
    return textwrap.dedent(head) + textwrap.dedent(variants) + textwrap.dedent(extra)


def write_campaign(root: Path, variants: str, extra: str = "", gpus: int = 2) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(DELIVER, root / DELIVER.name)
    path = root / "campaign.toml"
    path.write_text(campaign_text(variants, extra, gpus))
    return path


DELIVERED_VARIANTS = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {deliver_cmd("--label", "control", "--torch", "--acc-end", "0.70")}
    minutes = 2
    params = {{ base_model = "tiny-base", base_model_revision = "0123abcd" }}

    [[variant]]
    id = "wide"
    category = "useful"
    command = {deliver_cmd("--label", "wide", "--acc-end", "0.80")}
    minutes = 3
"""


def delivered_campaign(tmp_path_factory) -> Path:
    """Two runs, both accepted (distinct deliverables); the control has torch files."""
    if "delivered" not in _CACHE:
        from enginekit import drive

        root = tmp_path_factory.mktemp("delivered")
        path = write_campaign(root, DELIVERED_VARIANTS)
        drive(path, timeout=90)
        _CACHE["delivered"] = path
    return _CACHE["delivered"]


def delivered_bundle(tmp_path_factory):
    """The bundle of `delivered_campaign`, built once: (campaign path, BundleResult)."""
    if "delivered_bundle" not in _CACHE:
        from tui.bundle.wrapup import build_bundle
        from tui.campaign import load_plan

        path = delivered_campaign(tmp_path_factory)
        result = build_bundle(load_plan(path, check_files=False))
        _CACHE["delivered_bundle"] = (path, result)
    return _CACHE["delivered_bundle"]


def manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def relist(bundle: Path, rel: str) -> None:
    """Make the manifest agree with a file changed on purpose (size and sha256)."""
    import hashlib

    data = json.loads((bundle / "manifest.json").read_text())
    blob = (bundle / rel).read_bytes()
    for entry in data["files"]:
        if entry["path"] == rel:
            entry["bytes"], entry["sha256"] = len(blob), hashlib.sha256(blob).hexdigest()
    (bundle / "manifest.json").write_text(json.dumps(data, indent=2))


def run_ids(bundle: Path) -> dict[str, str]:
    """variant -> run id, from the manifest."""
    return {r["variant"]: r["id"] for r in manifest(bundle)["runs"]}


def verifiers_during(fn, root_pid: int | None = None):
    """(fn(), pids of the verifier processes started below `root_pid` (default: this
    process) while fn ran); one already running before, such as a verifier the engine
    left from the campaign itself, is not counted."""
    import psutil

    def tree() -> list:
        try:
            return psutil.Process(root_pid or os.getpid()).children(recursive=True)
        except psutil.Error:  # the root ended: nothing more to see
            return []

    before = {c.pid for c in tree()}
    seen, done = set(), threading.Event()

    def watch():
        while not done.is_set():
            for child in tree():
                try:
                    if child.pid not in before and "tui.training.file_check" in " ".join(
                            child.cmdline()):
                        seen.add(child.pid)
                except psutil.Error:
                    pass
            time.sleep(0.01)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        return fn(), seen
    finally:
        done.set()
        watcher.join()
