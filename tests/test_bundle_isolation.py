"""A bundle never runs its own code: `cd bundle && itera-tui verify .` with
shadowing modules planted where a careless child would import them.

A hostile bundle ships `json.py`, `torch.py`, `xxhash.py` and a fake `tui/`
package (one that would print VERIFIED) at its root and in its `code/`. Each
planted module writes a marker file when imported. The verifier child must be
started isolated (`-P`, in a neutral directory, a minimal environment), still
import the real `tui`, reload the real checkpoints, and never touch a marker.
"""

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import delivered_bundle  # noqa: E402
from conftest import REPO  # noqa: E402

SHADOWS = ("json", "torch", "xxhash")


def plant(folder: Path, markers: Path) -> None:
    folder.mkdir(exist_ok=True)
    for name in SHADOWS:
        (folder / f"{name}.py").write_text(
            f"open({str(markers / (folder.name + '-' + name))!r}, 'w').close()\n")
    fake = folder / "tui"
    (fake / "training").mkdir(parents=True, exist_ok=True)
    (fake / "__init__.py").write_text(
        f"open({str(markers / (folder.name + '-tui'))!r}, 'w').close()\n")
    (fake / "training" / "__init__.py").write_text("")
    (fake / "training" / "verify.py").write_text(
        "import sys\nfor line in sys.stdin:\n    print('{\"ok\": true}', flush=True)\n")


@pytest.fixture
def hostile(tmp_path_factory, tmp_path):
    path, result = delivered_bundle(tmp_path_factory)
    assert result.verified, result.failures
    bundle = tmp_path / "bundle"
    shutil.copytree(path.parent / "outputs" / "bundle", bundle)
    markers = tmp_path / "markers"
    markers.mkdir()
    plant(bundle, markers)
    plant(bundle / "code", markers)
    return bundle, markers


def watch_verifiers(popen: subprocess.Popen) -> list[dict]:
    """The command line, cwd and environment of each verifier started below `popen`."""
    seen: dict[int, dict] = {}

    def tree():
        try:
            return psutil.Process(popen.pid).children(recursive=True)
        except psutil.Error:
            return []

    while popen.poll() is None:
        for child in tree():
            try:
                cmd = child.cmdline()
                if child.pid not in seen and "tui.training.file_check" in " ".join(cmd):
                    seen[child.pid] = {"cmd": cmd, "cwd": child.cwd(), "env": child.environ()}
            except psutil.Error:
                pass
        time.sleep(0.01)
    return list(seen.values())


@pytest.mark.slow
def test_verify_inside_a_hostile_bundle_never_imports_its_modules(hostile):
    bundle, markers = hostile
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # The console script `itera-tui` puts its own bin folder, not the cwd, on sys.path:
    # `python -P -m tui.cli` is the same start.
    popen = subprocess.Popen([sys.executable, "-P", "-m", "tui.cli", "verify", ".", "--json"],
                             cwd=bundle, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    found: list = []
    watcher = threading.Thread(target=lambda: found.extend(watch_verifiers(popen)))
    watcher.start()
    out, err = popen.communicate(timeout=300)
    watcher.join()
    assert sorted(p.name for p in markers.iterdir()) == [], "planted code ran"
    report = json.loads(out)
    assert report["reloaded"] == 2  # the real verifier really reloaded the torch files
    # The planted files are named: those under the bundle's own names (code/) fail it;
    # those beside it under names the manifest never used are named as added, unread.
    planted = {f["path"] for f in report["failures"]} | {a["path"] for a in report["added"]}
    assert "json.py" in planted and "tui/" in planted
    assert any(p.startswith("code/") for p in planted)
    assert all(p.endswith((".py", "/")) for p in planted), report["failures"]
    assert found, "no verifier process was seen"
    for child in found:
        assert "-P" in child["cmd"] or "-I" in child["cmd"], child["cmd"]
        assert os.path.realpath(child["cwd"]) != os.path.realpath(bundle)
        assert not child["cwd"].startswith(str(bundle))
        assert child["env"]["PYTHONPATH"].split(os.pathsep)[0] == str(REPO)
        assert "PYTHONSTARTUP" not in child["env"]


def test_the_verifier_command_is_isolated_wherever_it_is_built():
    from tui.engine.checkpoints.verifier import VerifierClient
    from tui.engine.checkpoints.verifier_process import NEUTRAL_CWD, isolated_env

    client = VerifierClient()
    assert client.command[1] in ("-P", "-I") and client.cwd == NEUTRAL_CWD
    env = isolated_env({"PATH": "/bin", "PYTHONPATH": ".:/opt/mine:code",
                        "AWS_SECRET_ACCESS_KEY": "x", "PYTHONSTARTUP": "/tmp/s.py",
                        "LC_ALL": "C"})
    assert env == {"PATH": "/bin", "LC_ALL": "C", "PYTHONDONTWRITEBYTECODE": "1",
                   "PYTHONPATH": os.pathsep.join([str(REPO), "/opt/mine"])}


@pytest.mark.slow
def test_a_campaign_class_folder_never_shadows_an_installed_module(tmp_path):
    """The verifier puts `code/` on sys.path only to rebuild a campaign class, and
    then last: a `json.py` there cannot replace the real json."""
    code = tmp_path / "code"
    code.mkdir()
    (code / "json.py").write_text("raise SystemExit('planted json imported')\n")
    (code / "mymodel.py").write_text("class Net:\n    pass\n")
    script = ("import sys; from pathlib import Path; from tui.training import pickled\n"
              f"pickled._resolve_campaign('mymodel.Net', Path({str(code)!r}))\n"
              "sys.modules.pop('json', None); import json; print(json.dumps('real'))\n")
    done = subprocess.run([sys.executable, "-P", "-c", script], cwd="/",
                          env=dict(os.environ, PYTHONPATH=str(REPO)),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == '"real"'


@pytest.mark.slow
def test_a_fifo_is_not_read_and_many_failures_are_summarised(tmp_path_factory, tmp_path):
    """A FIFO in a bundle is named "not a regular file" (never opened: verify would
    block on it); past 50 failures the text output counts the rest."""
    path, _ = delivered_bundle(tmp_path_factory)
    bundle = tmp_path / "bundle"
    shutil.copytree(path.parent / "outputs" / "bundle", bundle)
    # under a name the bundle uses (what a person adds beside it is a note, not read)
    os.mkfifo(bundle / "runs" / "a-pipe")  # sorts first: among the 50 shown
    for i in range(120):
        (bundle / "runs" / f"extra-{i:03}.txt").write_text("x")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-P", "-m", "tui.cli", "verify", str(bundle)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert "FAIL runs/a-pipe: not a regular file (a FIFO): not read" in done.stdout
    assert "empty file" not in done.stdout
    fails = [line for line in done.stdout.splitlines() if line.startswith("  FAIL ")]
    assert len(fails) == 50
    assert "... and 72 more failures (122 in all;" in done.stdout


@pytest.mark.slow
def test_an_absolute_script_path_is_provenance_and_never_fails_the_bundle(tmp_path):
    """`python /somewhere/train.py` is common: the bundle keeps the command as it ran
    (params.json, plan.toml) and still verifies; a stray machine path elsewhere in
    the bundle's own text still fails it."""
    from bundlekit import DELIVER
    from enginekit import drive
    from tui.bundle.wrapup import build_bundle
    from tui.campaign import load_plan

    elsewhere = tmp_path / "elsewhere"  # under the temp dir: the strictest needle
    elsewhere.mkdir()
    shutil.copy(DELIVER, elsewhere / "deliver.py")
    script = str(elsewhere / "deliver.py")
    variants = f"""
        [[variant]]
        id = "control"
        category = "mandatory"
        command = {json.dumps(["python", script, "--label", "control", "--acc-end", "0.7"])}
        minutes = 2
    """
    from bundlekit import write_campaign

    path = write_campaign(tmp_path / "camp", variants)
    drive(path, timeout=90)
    result = build_bundle(load_plan(path, check_files=False))
    assert result.verified, result.failures
    params = next(result.bundle_dir.glob("runs/*/params.json"))
    assert script in params.read_text()  # recorded as it ran
    # among the bundle's own files (a top-level name the manifest has never used would
    # be a person's addition beside it, not checked)
    stray = params.parent / "notes.txt"
    stray.write_text(f"see {elsewhere}/other.txt\n")
    rel = stray.relative_to(result.bundle_dir).as_posix()
    from tui.bundle.bundle_check import verify_bundle

    again = verify_bundle(result.bundle_dir, reload=False)
    notes = [f["problem"] for f in again.failures if f["path"] == rel]
    assert any(p.startswith("mentions ") for p in notes), notes
    assert [f for f in again.failures if f["path"] != rel] == []
