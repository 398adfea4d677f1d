"""The data check counts what a trainer truncates silently, per variant, and the rule acts on it.

A `[[step]]` of `kind = "data_check"` runs `python -m tui.integrations.data_check`
through the real engine: the pinned corpus (200 examples, 20 of them longer
than the control's max length) is tokenised with the tokenizer of the
campaign's base (built here, nothing downloaded), counted against each
variant's max length, and the `truncation` rule with `max = 0` stops the
campaign on the control's count. The bundle's report gives the counts per
variant.
"""

from __future__ import annotations

import hashlib
import json
import textwrap

import pytest

from clikit import cli
from conftest import run_cli
from enginekit import copy_scripts, printer_cmd
from peftkit import build_tokenizer, corpus_lines

pytestmark = pytest.mark.slow


def _campaign(root, rule_max: int):
    copy_scripts(root)
    texts = corpus_lines(200, long_every=10)  # 20 examples of 40 words, 180 of 6
    (root / "data").mkdir()
    corpus = root / "data" / "train.jsonl"
    corpus.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    build_tokenizer(root / "base", texts)
    sha = hashlib.sha256(corpus.read_bytes()).hexdigest()
    path = root / "campaign.toml"
    path.write_text(textwrap.dedent(f"""
        [campaign]
        name = "trunc"
        question = "q"
        metric = "acc"

        [[lot]]
        gpu = "cpu"
        hours = 1
        price_usd = 1.0

        [metrics]
        step = 'step (\\d+)'
        loss = 'loss[:=]? *(\\S+)'
        acc = 'acc=(\\S+)'

        [corpus]
        root = "data"
        files = {{ "train.jsonl" = "{sha}" }}

        [[step]]
        id = "data_check"
        kind = "data_check"
        minutes = 1
        gpus = 0
        command = ["python", "-m", "tui.integrations.data_check"]

        [[variant]]
        id = "control"
        category = "mandatory"
        command = {printer_cmd("--steps", "5")}
        params = {{ base_model = "base", max_length = 24 }}
        minutes = 1

        [[variant]]
        id = "short"
        category = "useful"
        command = {printer_cmd("--steps", "5")}
        params = {{ base_model = "base", max_seq_length = 4 }}
        minutes = 1

        [[stop]]
        rule = "truncation"
        max = {rule_max}
    """))
    return path


def _records(root, step_id="data_check"):
    [run_dir] = (root / ".itera" / "runs").glob(f"{step_id}-*")
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_truncation_counted_per_variant_and_the_rule_stops_on_the_mandatory_count(tmp_path):
    path = _campaign(tmp_path, rule_max=0)
    proc = run_cli("run", "--headless", str(path), cwd=tmp_path, timeout=300,
                   env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert proc.returncode == 1, proc.stdout
    assert "campaign blocked: data_check stopped" in proc.stdout
    [counts] = [r for r in _records(tmp_path) if "truncated" in r]
    assert (counts["truncated"], counts["examples"]) == (20, 200)
    assert (counts["truncated_control"], counts["truncated_short"]) == (20, 200)
    status = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
    [step] = [r for r in status["runs"] if r["kind"] == "step"]
    assert step["stop"]["rule"] == "truncation", step
    assert step["stop"]["reason"] == "20 mandatory inputs truncated (max 0)"
    assert {r["state"] for r in status["runs"] if r["kind"] == "run"} <= {"queued", "dropped"}
    report = (tmp_path / "outputs" / "bundle" / "report.md").read_text()
    assert ("- `control` (mandatory, max length 24): 20 of 200 (10%)" in report)
    assert "- `short` (useful, max length 4): 200 of 200 (100%)" in report


def test_within_the_bound_the_runs_go_on_and_the_counts_are_kept(tmp_path):
    path = _campaign(tmp_path, rule_max=50)
    proc = run_cli("run", "--headless", str(path), cwd=tmp_path, timeout=300,
                   env={"HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf")})
    assert "data check" not in proc.stderr
    status = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
    assert {r["state"] for r in status["runs"] if r["kind"] == "run"} == {"completed"}
    manifest = json.loads((tmp_path / "outputs" / "bundle" / "manifest.json").read_text())
    [step] = [r for r in manifest["runs"] if r["kind"] == "step"]
    rows = {row["variant"]: row for row in step["truncation"]["variants"]}
    assert (rows["control"]["longer"], rows["short"]["longer"]) == (20, 200)
    assert step["truncation"]["tokenizer"] == "base"
    # the decision point's line, from the same table
    from tui.app.data_check_view import truncation_text
    from tui.campaign import load_plan
    from tui.engine.ledger.file import read_ledger
    from tui.engine.ledger.state import replay

    plan = load_plan(path)
    state = replay(read_ledger(plan.state_dir / "ledger.jsonl"))
    assert truncation_text(plan, state) == (
        "examples over each variant's max length (data check, cut silently by the trainer): "
        "control 20/200 (max 24), short 200/200 (max 4)")
