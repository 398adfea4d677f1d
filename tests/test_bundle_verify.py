"""`itera-tui verify`: a damaged bundle is caught and each failure is named.

Each test copies the bundle of a real delivered campaign, damages one thing
the way a disk, a careless copy or a careless script would, and runs the real
command line (fresh processes reload the torch files). The checks of the manifest
alone (no reload) damage a bundle of two printer runs built on fake runs and a
fake wrap-up (tests/fakeprocs.py, tests/fakewrapup.py): no process.
"""

import json
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import delivered_bundle, manifest, relist, run_ids  # noqa: E402
from conftest import run_cli  # noqa: E402
from tui.bundle.bundle_check import verify_bundle  # noqa: E402


@pytest.fixture
def printed_bundle(tmp_path):
    """The bundle of a campaign of two printer runs (control, wide): fake runs, fake
    wrap-up helpers, the real bundle builder."""
    from enginekit import write_plan
    from fakeprocs import drive_plan
    from fakewrapup import FakeWrapup
    from test_app_support import variants
    from tui.bundle.wrapup import build_bundle
    from tui.campaign import load_plan

    path = write_plan(tmp_path, variants([("control", "mandatory", ["--steps", "5"]),
                                          ("wide", "useful", ["--steps", "5"])]))
    drive_plan(path)
    result = build_bundle(load_plan(path), helpers=FakeWrapup())
    assert result.verified, result.failures
    return result.bundle_dir


@pytest.fixture
def bundle(tmp_path_factory, tmp_path):
    path, result = delivered_bundle(tmp_path_factory)
    assert result.verified, result.failures
    copy = tmp_path / "copied-bundle"
    shutil.copytree(path.parent / "outputs" / "bundle", copy)
    return copy


def verify_json(bundle: Path) -> tuple[int, dict]:
    done = run_cli("verify", str(bundle), "--json")
    return done.returncode, json.loads(done.stdout)


def problems_of(report: dict, rel: str) -> list[str]:
    return [f["problem"] for f in report["failures"] if f["path"] == rel]


@pytest.mark.slow  # the delivered campaign: real runs, verifier
def test_an_intact_copy_verifies(bundle):
    code, report = verify_json(bundle)
    assert code == 0 and report["verified"] is True and report["failures"] == []
    assert report["checked"] == len(manifest(bundle)["files"]) + 1
    assert report["reloaded"] == 2


@pytest.mark.slow  # the delivered campaign: real runs, verifier
def test_one_byte_changed_in_a_prediction_file(bundle):
    rel = f"runs/{run_ids(bundle)['wide']}/predictions.jsonl"
    blob = bytearray((bundle / rel).read_bytes())
    blob[10] ^= 0x01
    (bundle / rel).write_bytes(bytes(blob))
    code, report = verify_json(bundle)
    assert code == 1 and report["verified"] is False
    assert problems_of(report, rel) == [
        "sha256 mismatch: the content changed since the bundle was built"]
    assert len(report["failures"]) == 1


@pytest.mark.slow  # the delivered campaign: real runs, verifier
def test_an_empty_file(bundle):
    rel = f"runs/{run_ids(bundle)['control']}/error_analysis.json"
    (bundle / rel).write_bytes(b"")
    code, report = verify_json(bundle)
    assert code == 1
    assert "empty file (0 bytes)" in problems_of(report, rel)


@pytest.mark.slow  # the delivered campaign: real runs, verifier
def test_a_truncated_checkpoint_is_not_a_verified_output(bundle):
    rel = f"runs/{run_ids(bundle)['control']}/checkpoints/step-000001.pt"
    blob = (bundle / rel).read_bytes()
    (bundle / rel).write_bytes(blob[: len(blob) // 2])
    code, report = verify_json(bundle)
    assert code == 1
    problems = problems_of(report, rel)
    assert any(p.startswith("truncated:") for p in problems)
    assert any(p.startswith("does not reload in a fresh process: truncated") for p in problems)


@pytest.mark.slow  # the delivered campaign: real runs, verifier
def test_a_temporary_directory_path_in_reload_instructions(bundle):
    doc = bundle / "RELOAD.md"
    scratch = Path(tempfile.gettempdir()) / "itera-scratch" / "model.pt"
    doc.write_text(doc.read_text() + f"\nAlso see {scratch}\n")
    relist(bundle, "RELOAD.md")  # the manifest agrees: only the path gives it away
    code, report = verify_json(bundle)
    assert code == 1
    [problem] = problems_of(report, "RELOAD.md")
    assert problem.startswith("mentions a temporary directory") and "itera-scratch" in problem
    assert len(report["failures"]) == 1


@pytest.mark.slow  # the delivered campaign: real runs, verifier
def test_a_missing_run(bundle):
    rid = run_ids(bundle)["wide"]
    shutil.rmtree(bundle / "runs" / rid)
    code, report = verify_json(bundle)
    assert code == 1
    assert problems_of(report, f"runs/{rid}") == [
        f"expected run {rid} (named by the manifest) is missing"]


def test_a_run_removed_with_its_manifest_entries_is_still_expected(printed_bundle):
    bundle = printed_bundle
    rid = run_ids(bundle)["wide"]
    shutil.rmtree(bundle / "runs" / rid)
    data = manifest(bundle)
    data["runs"] = [r for r in data["runs"] if r["id"] != rid]
    data["files"] = [f for f in data["files"] if f.get("run") != rid]
    (bundle / "manifest.json").write_text(json.dumps(data))
    result = verify_bundle(bundle, reload=False)
    assert not result.verified
    assert {"path": f"runs/{rid}",
            "problem": f"expected run {rid} (named by the ledger copy) is missing"} \
        in result.failures


def test_an_unlisted_file(printed_bundle):
    bundle = printed_bundle
    (bundle / "runs" / run_ids(bundle)["wide"] / "notes.txt").write_text("added later\n")
    result = verify_bundle(bundle, reload=False)
    assert [f["problem"] for f in result.failures] == [
        "not listed in the manifest (added after the bundle was built)"]


@pytest.mark.slow  # the delivered campaign: real runs, verifier
def test_a_consistent_file_that_does_not_load_is_caught_by_the_reload(bundle):
    rid = run_ids(bundle)["control"]
    rel = f"runs/{rid}/model.pt"
    (bundle / rel).write_bytes(b"PK\x03\x04 this is not a torch file" * 8)
    sidecar = json.loads((bundle / (rel + ".json")).read_text())
    import hashlib

    blob = (bundle / rel).read_bytes()
    sidecar.update(bytes=len(blob), sha256=hashlib.sha256(blob).hexdigest())
    (bundle / (rel + ".json")).write_text(json.dumps(sidecar))
    relist(bundle, rel)
    relist(bundle, rel + ".json")
    result = verify_bundle(bundle)
    assert not result.verified
    [failure] = result.failures
    assert failure["path"] == rel
    assert failure["problem"].startswith("does not reload in a fresh process: not a loadable")


def test_several_damages_are_each_named(printed_bundle):
    bundle = printed_bundle
    rid = run_ids(bundle)["wide"]
    (bundle / "runs" / rid / "stdout.log").write_text("")
    (bundle / "runs" / rid / "stray.txt").write_text("x\n")
    result = verify_bundle(bundle, reload=False)
    assert {(f["path"], f["problem"]) for f in result.failures} >= {
        (f"runs/{rid}/stdout.log", "empty file (0 bytes)"),
        (f"runs/{rid}/stray.txt",
         "not listed in the manifest (added after the bundle was built)")}


@pytest.mark.slow  # the delivered campaign: real runs, verifier
def test_what_a_person_put_beside_the_bundle_is_a_note_not_a_failure(bundle, tmp_path):
    """RELOAD.md says to put corpus/ beside it; doing so keeps the bundle VERIFIED, and
    verify names what was added, apart from what was tampered with (issue 36, item 9)."""
    corpus = bundle / "corpus"
    corpus.mkdir()
    (corpus / "train.jsonl").write_text('{"text": "a"}\n')
    (corpus / "val.jsonl").write_text('{"text": "b"}\n')
    elsewhere = tmp_path / "big-corpus"
    elsewhere.mkdir()
    (bundle / "data").symlink_to(elsewhere)  # `ln -s` the corpus: not followed
    (bundle / "notes.txt").write_text("")
    result = verify_bundle(bundle, reload=False)
    assert result.verified, result.failures
    assert [(a["path"], a["files"]) for a in result.added] == [
        ("corpus/", 2), ("data", 1), ("notes.txt", 1)]
    human = run_cli("verify", str(bundle))
    assert human.returncode == 0, human.stdout + human.stderr
    out = human.stdout.splitlines()
    assert out[0].startswith(f"VERIFIED {bundle}: ")
    assert "  note: corpus/ (2 files) was added beside the bundle (no manifest entry has " \
        "this name): not part of it, not checked" in out
    rid = run_ids(bundle)["wide"]
    (bundle / "runs" / rid / "stdout.log").write_text("tampered\n")  # inside: still a FAIL
    assert not verify_bundle(bundle, reload=False).verified
