"""Hostile runs and hostile bundles: nothing from outside gets in, nothing runs, no traceback.

A run may leave symbolic links to /etc, acknowledge a checkpoint of another
campaign, or write a pickle whose reduce calls `os.system`; a bundle may come
with a manifest written to break the verifier. Each case is a real fixture
(real links, real ledger events, real torch pickles, the real command line).
"""

import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import delivered_bundle, delivered_campaign, manifest, relist, run_ids  # noqa: E402
from clikit import cli  # noqa: E402
from tui.bundle.bundle_check import verify_bundle  # noqa: E402
from tui.bundle.wrapup import build_bundle  # noqa: E402
from tui.campaign import load_plan  # noqa: E402
from tui.engine.ledger.file import Ledger  # noqa: E402
from tui.engine.ledger.events import CheckpointAcknowledged


@pytest.fixture
def campaign(tmp_path_factory, tmp_path):
    """A copy of a delivered campaign (two runs; the control has a checkpoint)."""
    source = delivered_campaign(tmp_path_factory).parent
    copy = tmp_path / "campaign"
    shutil.copytree(source, copy, symlinks=True,
                    ignore=shutil.ignore_patterns("outputs"))
    return copy


def run_dir(campaign: Path, variant: str) -> Path:
    [rid] = [p.name for p in (campaign / ".itera" / "runs").iterdir()
             if p.name.startswith(variant + "-")]
    return campaign / ".itera" / "runs" / rid


def build(campaign: Path):
    return build_bundle(load_plan(campaign / "campaign.toml", check_files=False))


@pytest.mark.slow
def test_symbolic_links_out_of_a_run_are_refused_and_said_so(campaign):
    wide = run_dir(campaign, "wide")
    (wide / "notes.txt").symlink_to("/etc/passwd")
    (wide / "eval").symlink_to("/etc")
    result = build(campaign)
    assert result.verified, result.failures
    passwd = Path("/etc/passwd").read_bytes()
    for p in result.bundle_dir.rglob("*"):
        assert not p.is_symlink()
        assert not (p.is_file() and p.read_bytes() == passwd), p
    [entry] = [r for r in manifest(result.bundle_dir)["runs"] if r["variant"] == "wide"]
    assert {"path": "notes.txt", "reason": "a symbolic link out of the run directory: not "
            "followed"} in entry["refused"]
    assert {r["path"] for r in entry["refused"]} == {"notes.txt", "eval"}
    report = (result.bundle_dir / "report.md").read_text()
    assert "### Refused: not copied into the bundle" in report
    assert "`notes.txt`: a symbolic link out of the run directory" in report


@pytest.mark.slow
def test_a_checkpoint_acknowledged_outside_the_run_is_not_copied(campaign, tmp_path):
    control = run_dir(campaign, "control")
    own = control / "checkpoints" / "step-000001.pt"
    other = tmp_path / "other-campaign" / "ckpt"
    other.mkdir(parents=True)
    shutil.copy(own, other / "step-000009.pt")
    shutil.copy(own.with_name(own.name + ".json"), other / "step-000009.pt.json")
    (control / "checkpoints" / "link.pt").symlink_to(other / "step-000009.pt")
    ledger = Ledger(campaign / ".itera" / "ledger.jsonl", time.time)
    for path in (str(other / "step-000009.pt"), "../../../other-campaign/ckpt/step-000009.pt",
                 "checkpoints/link.pt"):
        ledger.append(CheckpointAcknowledged(run=control.name, path=path, step=9,
                      sha256="0" * 64, mode="watched"))
    result = build(campaign)
    assert result.verified, result.failures
    [entry] = [r for r in manifest(result.bundle_dir)["runs"] if r["variant"] == "control"]
    assert entry["checkpoint"] == f"runs/{control.name}/checkpoints/step-000001.pt"
    reasons = {r["path"]: r["reason"] for r in entry["refused"]}
    outside = "checkpoint acknowledged outside the run directory: not copied"
    assert reasons == {"<absolute path>/step-000009.pt": outside,
                       "../../../other-campaign/ckpt/step-000009.pt": outside,
                       "checkpoints/link.pt": outside}
    listed = [f["path"] for f in manifest(result.bundle_dir)["files"]]
    assert not any("step-000009" in p or "link.pt" in p for p in listed)
    text = (result.bundle_dir / "report.md").read_text()
    assert str(tmp_path) not in text and outside in text


def _pickle_with_a_foreign_class(path: Path) -> None:
    import collections
    import types

    class Payload(collections.OrderedDict):
        pass

    Payload.__module__, Payload.__qualname__ = "plugin_mod", "Payload"
    module = types.ModuleType("plugin_mod")
    module.Payload = Payload
    sys.modules["plugin_mod"] = module
    try:
        torch.save(Payload(w=torch.zeros(2)), path)
    finally:
        del sys.modules["plugin_mod"]


class _RunsCode:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        return os.system, (f"touch {self.marker}",)


@pytest.mark.slow
def test_pickles_needing_foreign_code_are_named_and_never_unpickled(campaign, tmp_path,
                                                                    monkeypatch):
    wide = run_dir(campaign, "wide")
    ran = tmp_path / "the-payload-ran"
    imported = tmp_path / "the-plugin-was-imported"
    torch.save({"w": torch.zeros(1), "x": _RunsCode(ran)}, wide / "evil.pt")
    _pickle_with_a_foreign_class(wide / "plugin.pt")
    plugins = tmp_path / "plugins"  # importable by the verifier, and it would tell
    plugins.mkdir()
    (plugins / "plugin_mod.py").write_text(
        f"open({str(imported)!r}, 'w').close()\nimport collections\n"
        "class Payload(collections.OrderedDict):\n    pass\n")
    monkeypatch.setenv("PYTHONPATH", f"{plugins}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    result = build(campaign)
    assert not result.verified
    problems = {f["path"].rsplit("/", 1)[1]: f["problem"] for f in result.failures}
    assert set(problems) == {"evil.pt", "plugin.pt"}
    assert "needs posix.system" in problems["evil.pt"] and "not unpickled" in problems["evil.pt"]
    assert "needs plugin_mod.Payload" in problems["plugin.pt"]
    assert not ran.exists() and not imported.exists()  # no code ran, nothing foreign imported


@pytest.fixture
def bundle(tmp_path_factory, tmp_path):
    path, result = delivered_bundle(tmp_path_factory)
    assert result.verified, result.failures
    copy = tmp_path / "copied-bundle"
    shutil.copytree(path.parent / "outputs" / "bundle", copy)
    return copy


@pytest.mark.slow
def test_a_listed_symlink_to_a_system_file_fails_and_is_not_read(bundle):
    rel = f"runs/{run_ids(bundle)['wide']}/notes.txt"
    (bundle / rel).symlink_to("/etc/passwd")
    data = manifest(bundle)
    blob = Path("/etc/passwd").read_bytes()
    data["files"].append({"path": rel, "bytes": len(blob), "kind": "output",
                          "sha256": hashlib.sha256(blob).hexdigest()})
    (bundle / "manifest.json").write_text(json.dumps(data))
    result = verify_bundle(bundle, reload=False)
    assert result.failures == [{"path": rel, "problem": "symbolic link (a bundle holds plain "
                                                        "files only; not followed)"}]


@pytest.mark.slow
def test_a_machine_path_in_a_log_is_not_a_failure_but_in_reload_md_it_is(bundle):
    rid = run_ids(bundle)["wide"]
    here = str(bundle.resolve().parent)
    log = bundle / "runs" / rid / "stdout.log"
    log.write_text(log.read_text() + f"cache in {here}/cache\n")
    relist(bundle, f"runs/{rid}/stdout.log")
    assert verify_bundle(bundle, reload=False).verified
    doc = bundle / "RELOAD.md"
    doc.write_text(doc.read_text() + f"see {here}/cache\n")
    relist(bundle, "RELOAD.md")
    failures = verify_bundle(bundle, reload=False).failures
    assert failures and {f["path"] for f in failures} == {"RELOAD.md"}
    assert any("absolute directory of this machine" in f["problem"] for f in failures)


def _fake_bundle(root: Path, manifest_text: str | None) -> Path:
    root.mkdir()
    (root / "runs" / "r1").mkdir(parents=True)
    (root / "runs" / "r1" / "a.txt").write_text("a\n")
    if manifest_text is not None:
        (root / "manifest.json").write_text(manifest_text)
    return root


GOOD_FILE = {"path": "runs/r1/a.txt", "bytes": 2, "kind": "output", "run": "r1",
             "sha256": hashlib.sha256(b"a\n").hexdigest()}


NO_RUN = "holds no run: a bundle with nothing run proves nothing"


@pytest.mark.parametrize("text, problems", [
    (json.dumps({"files": [dict(GOOD_FILE, bytes="2")], "runs": [{"id": "r1"}]}),
     ["files[0].bytes is '2' (a string): not a whole number of bytes"]),
    (json.dumps({"files": [GOOD_FILE], "runs": 5}),
     ["runs is a number, not a list of runs", NO_RUN]),
    (json.dumps({"files": []}), ["lists no files: an empty bundle proves nothing",
                                 "runs is missing: a bundle names the runs it holds", NO_RUN]),
    (json.dumps({"files": [GOOD_FILE], "runs": []}), [NO_RUN]),
    ('{"files": ' + "[" * 100000 + "]" * 100000 + "}",
     ["nested too deeply (over 32 levels): not a manifest"]),
    (json.dumps({"files": [GOOD_FILE], "runs": [{"id": "r1"}], "x": [[[[[[[[[[[[[[[[[[[[[[[[
        [[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}),
     ["nested too deeply (over 32 levels): not a manifest"]),
    (json.dumps({"files": [dict(GOOD_FILE, sha256=5, kind=None, path="../x")],
                 "runs": [{"id": 7}]}),
     ["files[0].path is '../x': not a relative path inside the bundle",
      "files[0].sha256 is '5': not a sha256 (64 hex digits)",
      "files[0].kind is null, not a string", "runs[0].id is 7: not a run id", NO_RUN]),
    ("[1, 2]", ["unreadable: a list, not a JSON object with a 'files' list"]),
    ("{not json", ["unreadable: not JSON (Expecting property name enclosed in double quotes: "
                   "line 1 column 2 (char 1))"]),
], ids=["bytes-a-string", "runs-a-number", "no-files", "no-runs", "nested-100000",
        "nested-40", "wrong-types", "a-list", "not-json"])
def test_malformed_manifests_name_every_problem(tmp_path, text, problems):
    root = _fake_bundle(tmp_path / "b", text)
    done = cli("verify", str(root), "--json")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    report = json.loads(done.stdout)
    assert report["verified"] is False
    named = [f["problem"] for f in report["failures"] if f["path"] == "manifest.json"]
    assert named == problems


def test_a_directory_named_manifest_json(tmp_path):
    root = _fake_bundle(tmp_path / "b", None)
    (root / "manifest.json").mkdir()
    done = cli("verify", str(root))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stdout.splitlines()[1] == ("  FAIL manifest.json: a directory, not a file: "
                                           "nothing can be checked without the manifest")
