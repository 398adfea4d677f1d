"""A campaign of code that knows nothing of itera-tui ends with a bundle that verifies.

The campaign runs a stand-in for pytorch/examples' word_language_model (prints
`| epoch   1 |    20/   60 batches | ... | loss  3.70 |`, lets torch warn on
stderr from its site-packages, saves the whole model with `torch.save(model, f)`,
the class defined in the campaign's own model.py) through the real engine, in a
git repository left dirty. The bundle must reload the pickled module through
the campaign's classes (kept in the bundle's code/), keep the logs redacted
rather than fail on them, record the code's commit and diff, and verify again
from a copy with only the bundle, in one verifier process.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from conftest import REPO  # noqa: E402
from bundlekit import verifiers_during  # noqa: E402
from enginekit import drive  # noqa: E402
from tui.bundle.paths import python_dirs  # noqa: E402
from tui.bundle.wrapup import build_bundle  # noqa: E402
from tui.campaign import load_plan  # noqa: E402

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

WLM = Path(__file__).parent / "scripts" / "wlm"
GIT = ["git", "-c", "user.email=t@example.invalid", "-c", "user.name=t"]

CAMPAIGN = """
    [campaign]
    name = "wlm"
    question = "Does the stand-in language model train?"
    metric = "val_loss"
    direction = "min"
    control = "control"

    [[lot]]
    gpu = "cpu"
    hours = 1
    price_usd = 1.0
    gpus = 1

    [metrics]
    step = '\\| +(\\d+)/ *\\d+ batches'
    loss = '\\| loss +(\\S+)'
    val_loss = 'valid loss +(\\S+)'

    [deliverables]
    files = ["model.pt"]

    [[variant]]
    id = "control"
    category = "mandatory"
    command = ["python", "main.py", "--epochs", "1"]
    minutes = 1

    [engine]
    grace_seconds = 1.0
"""


def git(root: Path, *args: str) -> str:
    return subprocess.run([*GIT, "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("wlm") / "campaign"
    root.mkdir()
    for name in ("main.py", "model.py"):
        shutil.copy(WLM / name, root / name)
    (root / "campaign.toml").write_text(textwrap.dedent(CAMPAIGN))
    git(root, "init", "-q")
    git(root, "add", "main.py", "model.py", "campaign.toml")
    git(root, "commit", "-qm", "the stand-in")
    drive(root / "campaign.toml", timeout=120)
    with open(root / "main.py", "a") as f:
        f.write("# tuned after the run\n")  # the folder is dirty at wrap-up
    messages = []
    result = build_bundle(load_plan(root / "campaign.toml", check_files=False),
                          progress=messages.append)
    return root, result, messages


def manifest(bundle: Path) -> dict:
    return json.loads((bundle / "manifest.json").read_text())


def run_id(bundle: Path) -> str:
    [run] = manifest(bundle)["runs"]
    return run["id"]


def test_the_pickled_module_is_reloaded_through_the_campaigns_own_classes(built):
    root, result, messages = built
    assert result.verified, result.failures
    bundle = result.bundle_dir
    rel = f"runs/{run_id(bundle)}/model.pt"
    m = manifest(bundle)
    listed = {f["path"]: f for f in m["files"]}
    assert listed[rel]["kind"] == "artifact" and rel + ".json" not in listed  # no sidecar
    assert "model.RNNModel" in m["code"]["needs"][rel]
    assert "torch.nn.modules.rnn.LSTM" in m["code"]["needs"][rel]
    assert m["code"]["modules"] == ["code/model.py"]
    assert (bundle / "code" / "model.py").read_bytes() == (root / "model.py").read_bytes()
    reloads = [msg for msg in messages if msg.startswith("reloaded ")]
    assert reloads == [f"reloaded 1/1: {rel} ok (torch: a pickled model.RNNModel module "
                       f"({_parameters(reloads[0])} parameters))"]
    assert "1 checkpoints/artifacts reloaded" in (bundle / "report.md").read_text()


def _parameters(message: str) -> str:
    return message.rsplit("(", 1)[1].split()[0]


def test_logs_are_kept_redacted_and_never_fail_the_bundle(built):
    root, result, _ = built
    bundle, rid = result.bundle_dir, run_id(result.bundle_dir)
    original = (root / ".itera" / "runs" / rid / "stderr.log").read_bytes()
    site = next(d for d, what in python_dirs() if what == "<site-packages>"
                and d.encode() in original)
    kept = (bundle / "runs" / rid / "stderr.log").read_text()
    assert "UserWarning: dropout option adds dropout" in kept
    assert "<site-packages>/torch/nn/modules/rnn.py" in kept and site not in kept
    entry = next(f for f in manifest(bundle)["files"] if f["path"] == f"runs/{rid}/stderr.log")
    assert entry["redacted"] is True
    assert entry["source_sha256"] == hashlib.sha256(original).hexdigest()
    stdout = (bundle / "runs" / rid / "stdout.log").read_text()
    assert "| epoch   1 |    20/   60 batches |" in stdout
    report = (bundle / "report.md").read_text()
    for directory, _ in python_dirs():
        assert directory not in report
    assert str(root) not in report and "Verification: **VERIFIED**" in report


def test_the_code_that_made_the_bundle_is_recorded(built):
    root, result, _ = built
    code = manifest(result.bundle_dir)["code"]
    assert code["git"]["commit"] == git(root, "rev-parse", "HEAD").strip()
    assert code["git"]["dirty"] is True and code["git"]["diff"] == "code/git.diff"
    assert "+# tuned after the run" in (result.bundle_dir / "code" / "git.diff").read_text()
    report = (result.bundle_dir / "report.md").read_text()
    assert (f"Code: git commit `{code['git']['commit'][:12]}`, with uncommitted changes "
            "(`code/git.diff`).") in report
    assert not any(n.startswith((".itera", "outputs")) for n in code["git"]["untracked"])


def verify_counting_verifiers(bundle: Path, cwd: Path):
    """`itera-tui verify --json` in a fresh process; (exit, report, verifier pids seen)."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "tui.cli", "verify", str(bundle), "--json"],
                            cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    (out, err), seen = verifiers_during(lambda: proc.communicate(timeout=120), proc.pid)
    assert "Traceback" not in err, err
    return proc.returncode, json.loads(out), seen


def test_the_bundle_alone_verifies_elsewhere_in_one_verifier_process(built, tmp_path):
    _, result, _ = built
    copy = tmp_path / "elsewhere" / "bundle"
    shutil.copytree(result.bundle_dir, copy)
    code, report, verifiers = verify_counting_verifiers(copy, cwd=tmp_path)
    assert code == 0 and report["verified"] is True and report["reloaded"] == 1
    assert len(verifiers) == 1
    # without the code copy, the class cannot be rebuilt: named, not unpickled
    shutil.rmtree(copy / "code")
    m = manifest(copy)
    m["files"] = [f for f in m["files"] if not f["path"].startswith("code/")]
    (copy / "manifest.json").write_text(json.dumps(m))
    code, report, _ = verify_counting_verifiers(copy, cwd=tmp_path)
    assert code == 1
    [failure] = report["failures"]
    assert failure["path"].endswith("/model.pt")
    assert "needs model.RNNModel" in failure["problem"] and "not unpickled" in failure["problem"]


def test_the_reload_snippet_works_from_the_bundle_alone(built, tmp_path):
    _, result, _ = built
    copy = tmp_path / "bundle"
    shutil.copytree(result.bundle_dir, copy)
    doc = (copy / "RELOAD.md").read_text()
    snippet = doc.split("```python\n", 1)[1].split("```", 1)[0]
    assert "safe_globals(allowed([" in snippet and "from tui" not in snippet
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-c", snippet], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("model.pt RNNModel")
