"""Plan from evidence: a real campaign's bundle calibrates the next campaign's check.

The first campaign runs for real (the engine, `deliver.py` through the SDK, a
pilot and a full run per variant, a couple of seconds each), is wrapped up
into a verified bundle, and a second campaign with hand-written hours far off
is checked with `--prior` on that bundle.
"""

import hashlib
import json
import shutil
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import DELIVER  # noqa: E402
from clikit import cli  # noqa: E402
from enginekit import drive  # noqa: E402
from tui.campaign import load_plan  # noqa: E402
from tui.engine.ledger.file import read_ledger  # noqa: E402
from tui.engine.ledger.state import replay  # noqa: E402

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

ORDER = "IGPU-2026-0042"


def deliver(label: str, sleep: float, acc: float) -> str:
    return json.dumps(["python", DELIVER.name, "--label", label, "--steps", "12",
                       "--sleep", str(sleep), "--acc-end", str(acc)])


def campaign(root: Path, name: str, variants: str, corpus_text: str = "tokens\n",
             gpus: int = 2, order: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(DELIVER, root / DELIVER.name)
    (root / "data.txt").write_text(corpus_text)
    digest = hashlib.sha256(corpus_text.encode()).hexdigest()
    text = textwrap.dedent(f"""
        [campaign]
        name = "{name}"
        question = "Does the wide variant beat the control on acc?"
        metric = "acc"
        min_gain = 0.01

        [[lot]]
        gpu = "RTX 4090"
        days = 3
        gpus = {gpus}
        {f'order = "{order}"' if order else ''}

        [corpus]
        root = "."
        files = {{ "data.txt" = "{digest}" }}

        [pilot]
        steps = 4
        decide = "continue"

        [deliverables]
        files = ["predictions.jsonl"]
        unit = "corpus"

        [engine]
        grace_seconds = 2.0
    """) + textwrap.dedent(variants)
    path = root / "campaign.toml"
    path.write_text(text)
    return path


FIRST = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {deliver("control", 0.1, 0.7)}
    params = {{ width = 64 }}
    steps = 12
    minutes = 2

    [[variant]]
    id = "wide"
    category = "useful"
    command = {deliver("wide", 0.15, 0.8)}
    params = {{ width = 128 }}
    steps = 12
    minutes = 3
"""

# the same runs, the control renamed (matched by command and params), hours far off
SECOND = f"""
    [[variant]]
    id = "baseline"
    category = "mandatory"
    command = {deliver("control", 0.1, 0.7)}
    params = {{ width = 64 }}
    steps = 12
    hours = 40

    [[variant]]
    id = "wide"
    category = "useful"
    command = {deliver("wide", 0.15, 0.8)}
    params = {{ width = 128 }}
    steps = 12
    hours = 40
"""


@pytest.fixture(scope="module")
def first_bundle(tmp_path_factory) -> Path:
    from tui.bundle.wrapup import build_bundle

    root = tmp_path_factory.mktemp("prior") / "first"
    path = campaign(root, "first", FIRST, order=ORDER)
    drive(path, timeout=120)
    result = build_bundle(load_plan(path))
    assert result.verified, result.failures
    return result.bundle_dir


def measured(bundle: Path) -> dict[tuple[str, str], float]:
    """(variant, kind) -> seconds from launch to exit, from the bundle's ledger copy."""
    state = replay(read_ledger(bundle / "ledger.jsonl"))
    return {(r.target, r.kind): r.ended_t - r.launched_t for r in state.runs
            if r.kind in ("pilot", "run")}


def second_campaign(first_bundle: Path, corpus_text: str = "tokens\n", name: str = "second"):
    return campaign(first_bundle.parents[2] / name, name, SECOND, corpus_text=corpus_text,
                    gpus=1)


def test_calibrated_durations_come_from_the_prior_ledger_and_change_the_advice(first_bundle):
    path = second_campaign(first_bundle)
    prior = "../first/outputs/bundle"
    hand = json.loads(cli("check", str(path), "--prior", prior, "--json",
                          cwd=path.parent).stdout)
    assert hand["fits"] is False and hand["advice"], "40 h runs do not fit a 3-day lot"
    cal = hand["calibration"]
    assert cal["used"] == "hand-written" and cal["prior"] == prior
    tasks = {t["task"]: t for t in cal["tasks"]}
    truth = measured(first_bundle)
    for task, prior_variant, kind, how in (
            ("pilot:baseline", "control", "pilot", "command+params"),
            ("baseline", "control", "run", "command+params"),
            ("pilot:wide", "wide", "pilot", "id"), ("wide", "wide", "run", "id")):
        seconds = tasks[task]["calibrated_hours"] * 3600
        observed = truth[(prior_variant, kind)]
        assert abs(seconds - observed) <= 0.10 * observed, (task, seconds, observed)
        assert tasks[task]["matched_by"] == how
        assert tasks[task]["source"].startswith(f"{prior_variant}-")
        if kind == "run":
            assert tasks[task]["difference_hours"] < -39  # 40 h by hand, seconds measured
    for task, prior_variant, sleep in (("wide", "wide", 0.15), ("baseline", "control", 0.1)):
        step_s = tasks[task]["figures"]["step_s"]
        # 12 records with a sleep after each: 11 sleeps between the first and the last
        # record, a floor no load can lower; the whole run (launch to exit) a ceiling
        assert sleep * 11 / 12 * 0.99 <= step_s <= truth[(prior_variant, "run")] / 12, \
            (task, step_s)
    assert tasks["retrieval"]["matched_by"] == "bundle size"

    calibrated = json.loads(cli("check", str(path), "--prior", prior, "--json",
                                "--calibrated", cwd=path.parent).stdout)
    assert calibrated["calibration"]["used"] == "calibrated"
    assert calibrated["fits"] is True and calibrated["advice"] == []
    run = next(e for e in calibrated["calendar"] if e["id"] == "baseline")
    assert run["hours"] == pytest.approx(tasks["baseline"]["calibrated_hours"], abs=1e-4)

    text = cli("check", str(path), "--prior", prior, cwd=path.parent).stdout
    assert "calibration from prior ../first/outputs/bundle" in text
    line = next(l for l in text.splitlines()
                if l.strip().startswith("baseline ") and "(command+params)" in l)
    assert "40.0 h" in line and "-40.0 h -100%" in line and "start-up" in line


def test_the_frozen_plan_records_which_durations_were_used(first_bundle):
    import tomli_w

    from tui.bundle.prior import campaign_plan, prior_plan
    from tui.bundle.wrapup import frozen_plan
    from tui.engine import Engine

    path = second_campaign(first_bundle, name="frozen")
    (path.parent / "campaign.toml").write_text(path.read_text().replace(
        "[campaign]\n", '[campaign]\nprior = "../first/outputs/bundle"\ncalibrated = true\n',
        1))
    plan = prior_plan(load_plan(path))
    assert plan.calibration.used == "calibrated" and plan.variant("baseline").hours < 0.01
    Engine(plan, poll_interval=0.05).open().close()  # the engine freezes plan.raw
    frozen = tomllib.loads((plan.state_dir / "plan.toml").read_text())
    assert frozen["calibration"]["used"] == "calibrated"
    assert frozen["calibration"]["tasks"]["baseline"]["hand_hours"] == 40
    assert tomli_w.dumps(frozen)  # a plain TOML table, nothing the writer cannot write
    planned, _ = frozen_plan(load_plan(path))  # what the report compares against
    assert planned.variant("baseline").hours == pytest.approx(
        plan.variant("baseline").hours)
    # once started, the recorded calibration is used again even if the prior has gone
    moved = first_bundle.with_name("moved")
    first_bundle.rename(moved)
    try:
        again = campaign_plan(load_plan(path))
    finally:
        moved.rename(first_bundle)
    assert again.calibration == plan.calibration and again.raw["calibration"]


def test_a_prior_from_another_corpus_or_that_does_not_verify_is_refused(first_bundle, tmp_path):
    path = second_campaign(first_bundle, corpus_text="other tokens\n", name="other")
    proc = cli("check", str(path), "--prior", "../first/outputs/bundle", cwd=path.parent)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "refused" in proc.stderr and "another corpus" in proc.stderr

    tampered = tmp_path / "bundle"
    shutil.copytree(first_bundle, tampered)
    metrics = next(tampered.glob("runs/control-*/metrics.jsonl"))
    metrics.write_text(metrics.read_text() + '{"t": 1, "step": 99, "loss": 0.1}\n')
    good = second_campaign(first_bundle, name="same")
    proc = cli("check", str(good), "--prior", str(tampered), cwd=good.parent)
    assert proc.returncode == 2 and "does not verify" in proc.stderr
    assert "sha256 mismatch" in proc.stderr or "grown" in proc.stderr

    proc = cli("check", str(good), "--calibrated", cwd=good.parent)
    assert proc.returncode == 2 and "--calibrated: needs --prior" in proc.stderr


def test_report_opens_with_a_pasteable_summary_and_the_order_reference(first_bundle):
    report = (first_bundle / "report.md").read_text()
    head = report.split("**Question.**", 1)[0]
    assert head.startswith("# first: campaign report\n\n## Summary\n")
    assert "- **Question:** Does the wide variant beat the control on acc?" in head
    assert "- **Verdict:** **answered yes**: wide (acc 0.8 vs control 0.7) meets the bar" \
        in head
    assert "bundle VERIFIED" in head
    assert "- **Accepted deliverables (corpus):** 2 — `control-" in head
    assert "- **Cost per accepted corpus:** 23.57 USD (rental 47.14 USD / 2" in head
    assert "- **Window used:** " in head and "of the 3 d window" in head
    assert f"- **Order references:** lot1 (RTX 4090 x2, 3 d): `{ORDER}`" in head
    assert f"order {ORDER}" in report[report.index("## Budget"):]
    check = cli("check", str(first_bundle.parents[1] / "campaign.toml"), "--json")
    assert json.loads(check.stdout)["lots"][0]["order"] == ORDER
