"""The ablation check and the shared-path check at `itera-tui check` (text and --json).

Advice, never an error: every case here exits 0.
"""

import json
from pathlib import Path

import pytest

from conftest import stand_in_scripts
from clikit import cli
from tui.campaign import plan_from_dict
from tui.campaign.ablation import ablation, command_factors, variant_lines

HEAD = """
[campaign]
name = "abl"
question = "which factor helps?"

[[lot]]
gpu = "RTX 4090"
days = 7
"""


def variant(vid: str, args: str, params: str = "", category: str = "useful") -> str:
    return (f'\n[[variant]]\nid = "{vid}"\ncategory = "{category}"\n'
            f'command = "python train.py --label {vid} {args}"\nhours = 2\n'
            + (f"params = {{ {params} }}\n" if params else ""))


CONTROL = variant("control", "--lr 1e-3 --rank 8", category="mandatory")


def check(tmp_path: Path, text: str):
    path = tmp_path / "campaign.toml"
    path.write_text(HEAD + text)
    stand_in_scripts(path)
    proc = cli("check", str(path))
    assert proc.returncode == 0, proc.stderr
    data = json.loads(cli("check", str(path), "--json").stdout)
    return proc.stdout, data["ablation"]


def by_variant(data: dict) -> dict:
    return {v["variant"]: v for v in data["variants"]}


def test_one_factor_per_variant_raises_no_warning(tmp_path):
    text, data = check(tmp_path, CONTROL + variant("lr_hi", "--lr 3e-3 --rank 8")
                       + variant("rank_hi", "--lr 1e-3 --rank 16"))
    assert data["control"] == "control" and data["warnings"] == []
    lr = by_variant(data)["lr_hi"]
    assert lr["changes"] == [{"factor": "lr", "where": "command", "control": "1e-3",
                              "variant": "3e-3"}] and lr["warnings"] == []
    assert [c["factor"] for c in by_variant(data)["rank_hi"]["changes"]] == ["rank"]
    assert "lr_hi: lr 1e-3 -> 3e-3" in text and "rank_hi: rank 8 -> 16" in text
    assert "!" not in text.split("ablation against the control", 1)[1]


def test_a_variant_changing_two_factors_is_warned(tmp_path):
    text, data = check(tmp_path, CONTROL + variant("both", "--lr 3e-3 --rank 16"))
    both = by_variant(data)["both"]
    assert [c["factor"] for c in both["changes"]] == ["lr", "rank"]
    assert both["warnings"] == ["both changes 2 factors against the control (lr, rank): it "
                                "cannot isolate a cause"]
    assert data["warnings"] == both["warnings"]
    assert "! both changes 2 factors against the control (lr, rank)" in text


def test_identical_configs_are_warned_and_count_once(tmp_path):
    # the label names each variant (it holds its own id): a name, not a factor
    text, data = check(tmp_path, CONTROL + variant("again", "--lr 1e-3 --rank 8")
                       + variant("lr_hi", "--lr 3e-3 --rank 8"))
    again = by_variant(data)["again"]
    assert again["changes"] == []
    expected = ("control, again are identical in config (command, params, GPUs): they test "
                "one configuration and count once")
    assert again["warnings"] == [expected] and expected in data["warnings"]
    assert by_variant(data)["lr_hi"]["warnings"] == []
    assert "again: nothing (same config as the control)" in text and expected in text


def test_a_full_two_by_two_grid_is_warned(tmp_path):
    text, data = check(tmp_path, CONTROL + variant("lr_hi", "--lr 3e-3 --rank 8")
                       + variant("rank_hi", "--lr 1e-3 --rank 16")
                       + variant("both", "--lr 3e-3 --rank 16"))
    grid = [w for w in data["warnings"] if "grid" in w]
    assert grid == ["control, lr_hi, rank_hi, both form a full 2x2 grid of lr x rank: the "
                    "method says not to launch every combination at once; vary one factor "
                    "at a time against the control first"]
    assert grid[0] in text
    # three of the four corners are not a grid
    _, partial = check(tmp_path, CONTROL + variant("lr_hi", "--lr 3e-3 --rank 8")
                       + variant("both", "--lr 3e-3 --rank 16"))
    assert not [w for w in partial["warnings"] if "grid" in w]
    # one value of rank among the variants that change only lr and rank: no grid either
    _, line = check(tmp_path, CONTROL + variant("lr_hi", "--lr 3e-3 --rank 8")
                    + variant("rank_sched", "--lr 1e-3 --rank 16 --sched cos"))
    assert not [w for w in line["warnings"] if "grid" in w]


def test_a_param_and_the_option_that_passes_it_are_one_factor():
    raw = {"campaign": {"name": "n", "question": "q"},
           "lot": [{"gpu": "RTX 4090", "days": 3}],
           "variant": [
               {"id": "control", "category": "mandatory", "hours": 1, "gpus": 1,
                "command": ["python", "-m", "pkg.train", "--hidden-size", "128"],
                "params": {"hidden_size": 128}},
               {"id": "wide", "category": "useful", "hours": 1,
                "command": ["python", "-m", "pkg.train", "--hidden-size", "192", "--fp16"],
                "params": {"hidden_size": 192}}]}
    result = ablation(plan_from_dict(raw, Path("/nowhere/campaign.toml"), check_files=False))
    changes = {c.factor: c for c in result.of("wide").changes}
    assert set(changes) == {"hidden_size", "precision"}
    assert changes["hidden_size"].where == "params+command"
    assert (changes["hidden_size"].control, changes["hidden_size"].variant) == (128, 192)
    assert changes["precision"].control is None and changes["precision"].variant == "fp16"
    assert variant_lines(result, "control") == ["control: the control"]
    assert variant_lines(result, "wide")[1].startswith("  ! wide changes 2 factors")


def test_fine_tune_factors_are_one_factor_under_each_of_their_names(tmp_path):
    """TRL/PEFT/axolotl spellings: rank, lr, alpha, max length, precision."""
    control = variant("control", "--learning_rate 2e-4 --lora_r 8 --lora_alpha 16 --bf16 "
                      "--max_seq_length 128", category="mandatory")
    text, data = check(tmp_path, control
                       + variant("r16", "--lr 2e-4 --max_length 128 --bf16 --alpha 16",
                                 params="r = 16")
                       + variant("both", "--learning_rate 1e-4 --lora-rank 16 --lora_alpha 16 "
                                 "--torch_dtype bfloat16 --max_seq_length 128")
                       + variant("half", "--learning_rate 2e-4 --lora_r 8 --lora_alpha 16 "
                                 "--fp16 --cutoff_len 64 -r 3"))
    r16 = by_variant(data)["r16"]
    assert r16["changes"] == [{"factor": "rank", "where": "params", "control": "8",
                               "variant": 16}] and r16["warnings"] == []
    both = by_variant(data)["both"]
    assert [c["factor"] for c in both["changes"]] == ["lr", "rank"]  # bf16 == bfloat16
    assert both["warnings"] == ["both changes 2 factors against the control (lr, rank): it "
                                "cannot isolate a cause"]
    half = {c["factor"]: c for c in by_variant(data)["half"]["changes"]}
    assert set(half) == {"max_length", "precision", "r"}  # -r: the script's own short option
    assert (half["precision"]["control"], half["precision"]["variant"]) == ("bf16", "fp16")
    assert "both: lr 2e-4 -> 1e-4; rank 8 -> 16" in text


@pytest.mark.parametrize("argv,expected", [
    (["python", "t.py", "--lr=3e-3", "--shift", "-1", "--fp16"],
     {"argv[0]": "python", "argv[1]": "t.py", "lr": "3e-3", "shift": "-1", "fp16": "true"}),
    (["train", "--tag", "a", "--tag", "b"], {"argv[0]": "train", "tag": "a,b"}),
])
def test_command_factors(argv, expected):
    assert command_factors(argv) == expected


SAVE = """
[[variant]]
id = "control"
category = "mandatory"
command = ["python", "main.py", "--data", "data/wikitext-2", "--save", "SAVE_C"]
hours = 1

[[variant]]
id = "wide"
category = "useful"
command = ["python", "main.py", "--data", "data/wikitext-2", "--nhid", "400", "--save", "SAVE_W"]
hours = 1

[deliverables]
files = ["model.pt"]
"""


def test_check_warns_when_two_variants_write_the_same_path(tmp_path):
    path = tmp_path / "campaign.toml"
    no_deliverable = SAVE.split("[deliverables]")[0]
    path.write_text(HEAD + no_deliverable.replace("SAVE_C", "model.pt")
                    .replace("SAVE_W", "model.pt"))
    stand_in_scripts(path)
    data = json.loads(cli("check", str(path), "--json").stdout)
    assert data["shared_paths"] == [{
        "path": "model.pt", "variants": ["control", "wide"], "option": "--save",
        "text": "control, wide all write --save model.pt outside their run directories (the "
                "working directory is the campaign folder): each run overwrites the last; "
                "write {run_dir}/model.pt instead"}]
    text = cli("check", str(path)).stdout
    assert "warning (paths): control, wide all write --save model.pt" in text

    # declared as the deliverable, written by every variant outside its run directory:
    # no run can deliver it, a sure failure (exit 2, one message)
    path.write_text(HEAD + SAVE.replace("SAVE_C", "model.pt").replace("SAVE_W", "model.pt"))
    proc = cli("check", str(path))
    assert proc.returncode == 2 and proc.stderr.count("itera-tui:") == 1, proc.stderr
    assert ("deliverables.files: model.pt: control, wide write it in the campaign folder, "
            "not in the run directory") in proc.stderr

    path.write_text(HEAD + SAVE.replace("SAVE_C", "{run_dir}/model.pt")
                    .replace("SAVE_W", "{run_dir}/model.pt"))
    proc = cli("check", str(path), "--json")
    assert proc.returncode == 0 and json.loads(proc.stdout)["shared_paths"] == []

    path.write_text(HEAD + SAVE.replace("SAVE_C", "{run_dir}/model.pt")
                    .replace("SAVE_W", "out/model.pt"))
    shared = json.loads(cli("check", str(path), "--json").stdout)["shared_paths"]
    assert [(w["path"], w["variants"]) for w in shared] == [("out/model.pt", ["wide"])]
    assert "deliverable --save out/model.pt outside its run directory" in shared[0]["text"]


def test_any_argv_is_read_without_an_exception():
    from hypothesis import given, settings, strategies as st

    from tui.campaign.collisions import written_paths

    odd = ["-", "--", "--x=", "-m", "--save", "a/b.pt", "=", "{run_dir}/m"]
    token = st.one_of(st.sampled_from(odd), st.text(max_size=8))

    @settings(max_examples=300, deadline=None)
    @given(st.lists(token, min_size=1, max_size=8))
    def check(argv):
        command_factors(argv)
        for path, option in written_paths(tuple(argv)):
            assert "{run_dir}" not in path and (option is None or option.startswith("-"))

    check()
