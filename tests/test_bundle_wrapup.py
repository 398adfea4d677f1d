"""The wrap-up bundle of a real campaign: what it holds, what its report says, and
that reloading it works from the bundle alone (real processes, real torch files)."""

import hashlib
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

import bundlekit  # noqa: E402
from bundlekit import deliver_cmd, delivered_bundle, manifest, write_campaign  # noqa: E402
from conftest import run_cli  # noqa: E402
from enginekit import drive  # noqa: E402
from tui.bundle import wrapup  # noqa: E402
from tui.bundle.wrapup import build_bundle  # noqa: E402
from tui.campaign import load_plan  # noqa: E402

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers


def text_files(bundle: Path):
    for p in sorted(bundle.rglob("*")):
        if p.is_file() and not p.name.endswith(".pt"):  # the PNGs too, byte for byte
            yield p, p.read_bytes().decode("latin-1")


def test_bundle_holds_every_run_file_hashed_and_verified(tmp_path_factory):
    path, result = delivered_bundle(tmp_path_factory)
    bundle = path.parent / "outputs" / "bundle"
    assert result.bundle_dir == bundle and result.bundle_rel == "outputs/bundle"
    assert result.verified and result.failures == []
    m = manifest(bundle)
    ids = bundlekit.run_ids(bundle)
    control, wide = ids["control"], ids["wide"]
    listed = {f["path"]: f for f in m["files"]}
    for rel in ("plan.toml", "ledger.jsonl", "stops.json", "RELOAD.md", "report.md",
                "loss_curves.svg"):
        assert rel in listed, rel
    for rid in (control, wide):
        for name in ("params.json", "metrics.jsonl", "stdout.log", "exit.json",
                     "predictions.jsonl", "error_analysis.json"):
            assert f"runs/{rid}/{name}" in listed, (rid, name)
    assert listed[f"runs/{control}/model.pt"]["kind"] == "artifact"
    assert f"runs/{control}/model.pt.json" in listed
    checkpoints = [p for p, f in listed.items() if f["kind"] == "checkpoint"]
    assert checkpoints == [f"runs/{control}/checkpoints/step-000001.pt"]
    assert listed[f"runs/{control}/predictions.jsonl"]["kind"] == "predictions"
    # every listed file is there with its size and hash; nothing else but the manifest
    on_disk = {p.relative_to(bundle).as_posix() for p in bundle.rglob("*") if p.is_file()}
    assert on_disk == set(listed) | {"manifest.json"}
    for rel, f in listed.items():
        blob = (bundle / rel).read_bytes()
        assert len(blob) == f["bytes"] > 0 and hashlib.sha256(blob).hexdigest() == f["sha256"]
    # empty stderr logs are left out, and said so
    assert {"path": f"runs/{wide}/stderr.log", "reason": "empty"} in m["omitted"]
    # provenance: tool version, frozen plan hash, the adapter's exact base revision
    import tui

    assert m["tool"]["version"] == tui.__version__
    frozen = (path.parent / ".itera" / "plan.toml").read_bytes()
    assert m["plan"]["sha256"] == hashlib.sha256(frozen).hexdigest()
    runs = {r["id"]: r for r in m["runs"]}
    assert runs[control]["base_model_revision"] == "0123abcd"
    assert runs[control]["checkpoint_step"] == 1 and runs[control]["accepted"] is True
    assert set(m["run_ids"]) == {control, wide}


def test_no_path_of_this_machine_is_written_into_the_bundle(tmp_path_factory):
    path, _ = delivered_bundle(tmp_path_factory)
    bundle = path.parent / "outputs" / "bundle"
    campaign_dir = str(path.parent)
    home = os.path.expanduser("~")
    for p, text in text_files(bundle):
        assert campaign_dir not in text, p
        assert not re.search(re.escape(home) + r"(/|\b)", text), p
        assert "/tmp/" not in text and ".bundle-staging" not in text, p
    control = bundlekit.run_ids(bundle)["control"]
    log = (bundle / "runs" / control / "stdout.log").read_text()
    assert f"writes into ./.itera/runs/{control}" in log
    entry = next(f for f in manifest(bundle)["files"]
                 if f["path"] == f"runs/{control}/stdout.log")
    assert entry["paths_rewritten"] and entry["source_sha256"] != entry["sha256"]
    assert manifest(bundle)["paths"]["campaign_dir"] == "."


def test_report_answers_costs_and_tells_how_to_retrieve(tmp_path_factory):
    path, _ = delivered_bundle(tmp_path_factory)
    bundle = path.parent / "outputs" / "bundle"
    report = (bundle / "report.md").read_text()
    assert "Does the wide variant beat the control on acc?" in report
    assert "**answered yes**: wide (acc 0.8 vs control 0.7) meets the bar (gain >= 0.01)" \
        in report
    assert "threshold" not in report  # only min_gain is set
    assert "Verification: **VERIFIED**" in report
    # the seed's example: two distinct accepted deliverables on a 47.14 USD lot
    assert "**Cost per accepted corpus: 23.57 USD**" in report
    assert "Other expenses, apart from the rental: 4.50 USD" in report
    assert "Hours reserved: 3 d rental window" in report and "Hours observed:" in report
    assert "| control | mandatory |" in report
    assert "![loss per run, log scale](loss_curves.png)" in report
    assert "![acc per run](quality.png)" in report
    retrieval = report[report.index("## Retrieval"):]
    assert "rsync -avP --partial -e ssh '<user>@<box>:<campaign-dir>/outputs/bundle/'" in retrieval
    size = sum(p.stat().st_size for p in bundle.rglob("*") if p.is_file())
    assert f"({size} bytes," in retrieval and "within the 30 min planned for retrieval" in retrieval
    assert ET.parse(bundle / "loss_curves.svg").getroot().tag == "{http://www.w3.org/2000/svg}svg"


def test_reload_snippet_runs_from_the_bundle_with_torch_alone(tmp_path_factory):
    path, _ = delivered_bundle(tmp_path_factory)
    bundle = path.parent / "outputs" / "bundle"
    doc = (bundle / "RELOAD.md").read_text()
    snippet = doc.split("```python\n", 1)[1].split("```", 1)[0]
    assert "weights_only=True" in snippet and "from tui" not in snippet
    assert "revision 0123abcd" in doc
    assert "pip install itera-tui==" not in doc and "not published on PyPI" in doc
    # a machine with torch only: the itera-tui package cannot be imported at all
    blocked = "import sys\nsys.modules['tui'] = None\n" + snippet
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", blocked], cwd=bundle, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "['bias', 'weight']" in done.stdout and "step 1" in done.stdout
    # the snippet checks each file against the manifest before loading it
    tampered = tmp_path_factory.mktemp("tampered") / "bundle"
    import shutil

    shutil.copytree(bundle, tampered)
    control = bundlekit.run_ids(bundle)["control"]
    with open(tampered / "runs" / control / "model.pt", "ab") as f:
        f.write(b"\0")
    done = subprocess.run([sys.executable, "-c", blocked], cwd=tampered, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "sha256 does not match manifest.json" in done.stderr


STOPPED_VARIANTS = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {deliver_cmd("--label", "control", "--steps", "20", "--nan-at", "3")}
    minutes = 2

    [[variant]]
    id = "wide"
    category = "useful"
    command = {deliver_cmd("--label", "wide", "--steps", "20", "--nan-at", "4")}
    minutes = 2

    [[stop]]
    rule = "non_finite"
"""


@pytest.fixture(scope="module")
def stopped_campaign(tmp_path_factory):
    path = write_campaign(tmp_path_factory.mktemp("stopped"), STOPPED_VARIANTS)
    drive(path, timeout=60)
    return path


def test_zero_accepted_cost_is_undefined_with_incurred_cost_and_causes(stopped_campaign):
    result = build_bundle(load_plan(stopped_campaign, check_files=False))
    assert result.verified, result.failures
    report = (result.bundle_dir / "report.md").read_text()
    assert "**Cost per accepted corpus: undefined** (0 accepted)" in report
    assert "Incurred cost: 51.64 USD (rental 47.14 + other expenses 4.50)" in report
    assert "0.00 USD" not in report
    assert report.count("stopped by non_finite") >= 2
    assert "**Verdict:** **inconclusive**: no accepted control" in report
    stops = json.loads((result.bundle_dir / "stops.json").read_text())
    # each variant stopped at the step its script went non-finite (--nan-at 3 / 4)
    assert {s["variant"]: s["step"] for s in stops} == {"control": 3, "wide": 4}
    for s in stops:
        assert s["rule"] == "non_finite" and "loss" in s["reason"]
        assert s["time"].endswith("Z") and isinstance(s["t"], float)
    runs = manifest(result.bundle_dir)["runs"]
    assert sorted(r["variant"] for r in runs) == ["control", "wide"]  # both full runs listed
    for r in runs:
        assert r["accepted"] is False, r
        assert r["rejection"].startswith("stopped by non_finite"), r
    assert "no checkpoint or artifact to reload" in (result.bundle_dir / "RELOAD.md").read_text()
    human = run_cli("verify", str(result.bundle_dir))
    assert human.returncode == 0
    assert human.stdout.startswith(f"VERIFIED {result.bundle_dir}: 19 files match the manifest")


def test_a_new_bundle_replaces_the_old_only_once_complete(stopped_campaign, monkeypatch):
    plan = load_plan(stopped_campaign, check_files=False)
    outputs = plan.outputs_dir
    first = build_bundle(plan)
    before = (first.bundle_dir / "manifest.json").read_bytes()
    (outputs / ".bundle-staging-999999").mkdir()  # left by a crashed wrap-up

    def crash(*args, **kwargs):
        raise RuntimeError("disk full")

    monkeypatch.setattr(wrapup.report, "render", crash)
    with pytest.raises(RuntimeError):
        build_bundle(plan)
    assert (first.bundle_dir / "manifest.json").read_bytes() == before  # untouched
    # no half-built leftovers (FETCH.txt: the fetch command the first build wrote)
    assert sorted(p.name for p in outputs.iterdir()) == ["FETCH.txt", "bundle"]
    monkeypatch.undo()
    again = build_bundle(plan)
    assert again.verified and sorted(p.name for p in outputs.iterdir()) == ["FETCH.txt",
                                                                            "bundle"]


def test_the_wrapup_writes_the_fetch_command_whole_beside_the_bundle(tmp_path_factory):
    """`cat outputs/FETCH.txt` shows the command whole, however narrow the pane (issue 36
    item 5); it sits beside the bundle, not in it: the manifest does not list it."""
    from tui.campaign.retrieval import Origin, retrieval_command

    path, result = delivered_bundle(tmp_path_factory)
    fetch = path.parent / "outputs" / "FETCH.txt"
    plan = load_plan(path, check_files=False)
    assert fetch.read_text() == retrieval_command(plan, "outputs/bundle",
                                                  Origin.here(plan)) + "\n"
    assert fetch.read_text().startswith("rsync -avP ") and fetch.read_text().count("\n") == 1
    assert "FETCH.txt" not in json.dumps(manifest(result.bundle_dir))
