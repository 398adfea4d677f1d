"""A LoRA campaign as people rent GPUs for: TRL `SFTTrainer` + PEFT, through the real engine.

Real trl and peft from the registry; the base is a one-layer GPT-2 built from a
config with a tokenizer trained here (tests/peftkit.py), saved to the campaign
folder as `base`; the hub case is a fake huggingface_hub cache in a temp
folder with HF_HUB_OFFLINE=1. Nothing is downloaded. The script
(tests/scripts/sft_lora.py) carries the one-line callback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from venvkit import make_venv
from enginekit import copy_scripts, drive, script_cmd
from peftkit import build_base, corpus_lines, fake_hub_cache
from tui.bundle.wrapup import build_bundle
from tui.campaign import load_plan

pytestmark = pytest.mark.slow
COMMIT = "5eed" + "0" * 36


def _jsonl(path, texts):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))


def sft(*args: str) -> str:
    return script_cmd("sft_lora.py", "--steps", "12", "--out", "{run_dir}/adapter",
                      "--output-dir", "{run_dir}/sft-out", *args)


def _folder(folder):
    """A campaign folder: the scripts, a tiny base and its corpus (nothing downloaded)."""
    folder.mkdir(parents=True)
    copy_scripts(folder)
    texts = corpus_lines(200, long_every=10)  # 20 of 200 examples over the max length
    build_base(folder / "base", texts)
    _jsonl(folder / "data" / "train.jsonl", texts)
    _jsonl(folder / "data" / "eval.jsonl", corpus_lines(16))
    return folder


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    root = tmp_path_factory.mktemp("peft")
    folder = _folder(root / "campaign")
    hub = root / "hub"
    fake_hub_cache(hub, "org/tiny", folder / "base", commit=COMMIT)
    path = folder / "campaign.toml"
    path.write_text(textwrap.dedent(f"""
        [campaign]
        name = "lora"
        question = "does rank 16 beat rank 8?"
        metric = "eval_loss"
        direction = "min"

        [[lot]]
        gpu = "cpu"
        hours = 1
        price_usd = 1.0

        [engine]
        grace_seconds = 20.0

        [[variant]]
        id = "control"
        category = "mandatory"
        command = {sft("--rank", "8", "--lr", "5e-3")}
        minutes = 5

        [[variant]]
        id = "r16"
        category = "useful"
        command = {sft("--rank", "16", "--lr", "1e-2")}
        minutes = 5

        [[variant]]
        id = "nan_lr"
        category = "exploratory"
        command = {sft("--rank", "8", "--lr", "5e-3", "--nan-lr-at", "3")}
        minutes = 5

        [[variant]]
        id = "hub"
        category = "exploratory"
        command = {sft("--rank", "8", "--lr", "5e-3", "--base", "org/tiny")}
        minutes = 5

        [[stop]]
        rule = "non_finite"
        metrics = ["loss", "grad_norm"]
    """))
    env = {"HF_HUB_CACHE": str(hub), "HF_HUB_OFFLINE": "1", "HF_HOME": str(root / "hf-home"),
           "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        engine = drive(path, timeout=600)
        plan = load_plan(path)
        result = build_bundle(plan)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    runs = {r.target: r for r in engine.state.runs}
    manifest = json.loads((result.bundle_dir / "manifest.json").read_text())
    entries = {r["variant"]: r for r in manifest["runs"]}
    return dict(root=root, folder=folder, path=path, engine=engine, runs=runs, result=result,
                manifest=manifest, entries=entries, plan=plan)


def _records(campaign, variant):
    run = campaign["runs"][variant]
    path = campaign["plan"].state_dir / "runs" / run.id / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_sft_metrics_are_read_and_the_nan_learning_rate_is_stopped(campaign):
    runs = campaign["runs"]
    assert runs["control"].state == "completed", runs["control"]
    assert runs["r16"].state == "completed", runs["r16"]
    assert runs["nan_lr"].state == "stopped" and runs["nan_lr"].stop.rule == "non_finite"
    logged = [r for r in _records(campaign, "control") if "loss" in r and "event" not in r]
    assert {"mean_token_accuracy", "num_tokens", "entropy", "grad_norm"} <= logged[0].keys()
    assert any("eval_loss" in r for r in _records(campaign, "control"))


def test_adapters_are_bundled_with_their_base_pinned_and_reloaded_on_it(campaign):
    assert campaign["result"].verified, campaign["result"].failures
    control = campaign["entries"]["control"]
    [adapter] = [a for a in control["adapters"] if a["role"] == "artifact"]
    assert adapter["path"] == f"runs/{control['id']}/adapter"
    assert (adapter["base"], adapter["pinned_by"]) == ("base", "content_digest")
    assert adapter["loaded_on_base"] and adapter["r"] == 8
    assert control["base_model"] == "base"
    assert control["base_model_revision"] == adapter["revision"]
    assert adapter["revision"].startswith("sha256:")
    hub = campaign["entries"]["hub"]["adapters"][0]
    assert (hub["base"], hub["revision"], hub["pinned_by"]) == ("org/tiny", COMMIT, "hub_cache")
    assert hub["loaded_on_base"]
    # the NaN run's adapter is not usable: left out, with why
    nan = campaign["entries"]["nan_lr"]
    assert not any(a["role"] == "artifact" for a in nan.get("adapters") or [])
    refused = {x["path"]: x["reason"] for x in nan.get("refused") or []}
    saved = campaign["plan"].state_dir / "runs" / nan["id"] / "adapter"
    if saved.is_dir():  # the script saved after the stop: refused, with why
        assert "tensors hold NaN or inf" in refused["adapter/"], refused
    else:  # killed before it saved: nothing to refuse
        assert "adapter/" not in refused
    report = (campaign["result"].bundle_dir / "report.md").read_text()
    assert (f"Run `{control['id']}`: adapter `runs/{control['id']}/adapter`: base model: the "
            f"local folder `base` (not in the bundle), pinned by the content digest "
            f"`{adapter['revision']}`") in report
    assert f"base model `org/tiny` at revision `{COMMIT}`" in report
    doc = (campaign["result"].bundle_dir / "RELOAD.md").read_text()
    assert f'from_pretrained("org/tiny", revision="{COMMIT}")' in doc
    assert "assert base_digest(" in doc and adapter["revision"] in doc
    assert "PeftModel.from_pretrained(" in doc


def test_reload_md_adapter_lines_reproduce_a_logged_eval_loss_in_a_fresh_venv(campaign,
                                                                                tmp_path):
    bundle = campaign["result"].bundle_dir
    doc = (bundle / "RELOAD.md").read_text()
    snippet = doc.split("```python\n", 1)[1].split("```", 1)[0]
    assert "from tui" not in snippet
    where = tmp_path / "copy"
    shutil.copytree(bundle, where)
    shutil.copytree(campaign["folder"] / "base", where / "base")  # where the line says
    shutil.copy(campaign["folder"] / "data" / "eval.jsonl", where / "eval.jsonl")
    venv = make_venv(tmp_path / "venv", sees_these_libraries=True).parent.parent
    control = campaign["entries"]["control"]
    name = next(line.split(" = PeftModel")[0] for line in snippet.splitlines()
                if " = PeftModel.from_pretrained(" in line and f'runs/{control["id"]}/adapter'
                in line)
    measure = textwrap.dedent(f"""
        import json, torch
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained("base")
        ids = torch.tensor([tok(json.loads(l)["text"])["input_ids"]
                            for l in open("eval.jsonl")])
        with torch.no_grad():
            print("EVAL_LOSS", {name}(input_ids=ids, labels=ids).loss.item())
    """)
    blocked = "import sys\nsys.modules['tui'] = None\n" + snippet + measure
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {
        "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(campaign["root"] / "hub")}
    done = subprocess.run([str(venv / "bin" / "python"), "-c", blocked], cwd=where, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = float(done.stdout.split("EVAL_LOSS")[1].split()[0])
    logged = [r["eval_loss"] for r in _records(campaign, "control") if "eval_loss" in r]
    assert abs(got - logged[-1]) < 1e-5, (got, logged)


def test_check_names_rank_and_lr_as_what_the_second_variant_changes(campaign):
    from clikit import cli

    proc = cli("check", str(campaign["path"]), "--json")
    data = json.loads(proc.stdout)
    r16 = next(v for v in data["ablation"]["variants"] if v["variant"] == "r16")
    assert [c["factor"] for c in r16["changes"]] == ["lr", "rank"]
    assert r16["warnings"] == ["r16 changes 2 factors against the control (lr, rank): it "
                               "cannot isolate a cause"]


def test_sft_with_zero_lines_changed_is_read_by_the_hf_trainer_preset(tmp_path):
    """The same script with no callback: TRL's printed dicts, its own metrics included."""
    from tui.campaign.presets import build_spec
    from tui.engine.reading.feeds import recorded_sources

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ITERA_")} | {
        "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf"), "OMP_NUM_THREADS": "1"}
    with open(run_dir / "stdout.log", "wb") as out, open(run_dir / "stderr.log", "wb") as err:
        done = subprocess.run([sys.executable, "scripts/sft_lora.py", "--no-callback",
                               "--steps", "6", "--out", str(run_dir / "adapter"),
                               "--output-dir", str(run_dir / "sft-out")],
                              cwd=_folder(tmp_path / "campaign"), env=env, stdout=out,
                              stderr=err,
                              timeout=300)
    assert done.returncode == 0, (run_dir / "stderr.log").read_text()[-2000:]
    _, printed, _ = recorded_sources(run_dir, build_spec("hf_trainer"))
    logged = [r for r in printed if r.get("source") == "stdout" and "loss" in r]
    assert len(logged) == 6
    assert {"mean_token_accuracy", "num_tokens", "entropy", "grad_norm",
            "learning_rate"} <= logged[0].keys()
    assert any("eval_loss" in r for r in printed)
