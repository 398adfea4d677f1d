"""A launcher is not an ablation factor (issue 34, item 11).

`accelerate launch`, `env VAR=...`, `torchrun ...` only start the script: a
variant that differs from the control by its launcher and one option changes
that one option, not four positional arguments and the launcher's flags.
"""

import json

import pytest

from clikit import check
from conftest import stand_in_scripts
from test_campaign_ablation import CONTROL, HEAD, by_variant
from tui.campaign.factors import script_argv


def launched(vid: str, launcher: str, args: str) -> str:
    return (f'\n[[variant]]\nid = "{vid}"\ncategory = "useful"\n'
            f'command = "{launcher} train.py --label {vid} {args}"\nhours = 2\n')


def test_a_command_that_differs_by_its_launcher_changes_only_its_options(tmp_path):
    path = tmp_path / "campaign.toml"
    path.write_text(HEAD + CONTROL
                    + launched("acc", "accelerate launch --num_processes 1 --mixed_precision no",
                               "--lr 3e-3 --rank 8")
                    + launched("tr", "torchrun --standalone --nproc_per_node 1",
                               "--lr 1e-3 --rank 16")
                    + launched("envd", "env TOKENIZERS_PARALLELISM=false python -u",
                               "--lr 1e-3 --rank 32"))
    stand_in_scripts(path)
    proc = check(str(path))
    assert proc.returncode == 0, proc.stderr
    data = by_variant(json.loads(check(str(path), "--json").stdout)["ablation"])
    assert data["acc"]["changes"] == [{"factor": "lr", "where": "command", "control": "1e-3",
                                       "variant": "3e-3"}] and data["acc"]["warnings"] == []
    assert [(c["factor"], c["variant"]) for c in data["tr"]["changes"]] == [("rank", "16")]
    assert [(c["factor"], c["variant"]) for c in data["envd"]["changes"]] == [("rank", "32")]
    assert "acc: lr 1e-3 -> 3e-3" in proc.stdout and "cannot isolate" not in proc.stdout


def test_only_the_launcher_differs_the_config_is_the_same(tmp_path):
    path = tmp_path / "campaign.toml"
    path.write_text(HEAD + CONTROL + launched("acc", "accelerate launch", "--lr 1e-3 --rank 8"))
    stand_in_scripts(path)
    data = json.loads(check(str(path), "--json").stdout)["ablation"]
    acc = by_variant(data)["acc"]
    assert acc["changes"] == []
    assert acc["warnings"][0].startswith("control, acc are identical in config")


@pytest.mark.parametrize("argv, script", [
    (["python", "train.py", "--lr", "1"], ("train.py", "--lr", "1")),
    (["/usr/bin/python3.11", "-u", "-W", "ignore", "train.py"], ("train.py",)),
    (["accelerate", "launch", "--num_processes", "2", "--multi_gpu", "train.py", "--x"],
     ("train.py", "--x")),
    (["torchrun", "--standalone", "--nproc_per_node=2", "train.py"], ("train.py",)),
    (["python", "-m", "torch.distributed.run", "--nproc_per_node", "2", "t.py", "a"],
     ("t.py", "a")),
    (["env", "-u", "HOME", "A=1", "B=2", "python", "t.py"], ("t.py",)),
    (["deepspeed", "--num_gpus", "2", "t.py", "--deepspeed", "ds.json"],
     ("t.py", "--deepspeed", "ds.json")),
    (["accelerate", "launch", "-m", "pkg.train", "--lr", "1"], ("-m", "pkg.train", "--lr", "1")),
    (["python", "-m", "pkg.train"], ("-m", "pkg.train")),
    (["./train.sh", "--lr", "1"], ("./train.sh", "--lr", "1")),
    ([], ()),
])
def test_script_argv_drops_what_only_launches_the_script(argv, script):
    assert script_argv(argv) == script
