"""`check` reads a script's argparse defaults for the paths it writes (issue 34, item 10).

pytorch/examples' word_language_model/main.py declares `--save` with
`default='model.pt'`: a plan that does not pass `--save` makes every run write
the same ./model.pt in the campaign folder. The script is read with `ast`,
never imported or run.
"""

import json
import textwrap

from clikit import check
from tui.campaign.script_defaults import argparse_defaults

# the argument block of pytorch/examples word_language_model/main.py, as published
WLM_ARGS = """\
import argparse
import torch
parser = argparse.ArgumentParser(description='PyTorch Wikitext-2 RNN/LSTM/GRU/Transformer Language Model')
parser.add_argument('--data', type=str, default='./data/wikitext-2',
                    help='location of the data corpus')
parser.add_argument('--model', type=str, default='LSTM',
                    help='type of network (RNN_TANH, RNN_RELU, LSTM, GRU, Transformer)')
parser.add_argument('--lr', type=float, default=20,
                    help='initial learning rate')
parser.add_argument('--log-interval', type=int, default=200, metavar='N',
                    help='report interval')
parser.add_argument('--save', type=str, default='model.pt',
                    help='path to save the final model')
parser.add_argument('--onnx-export', type=str, default='',
                    help='path to export the final model in onnx format')
args = parser.parse_args()
raise SystemExit("check must never run this script")
"""


def plan(tmp_path, *commands: str) -> str:
    variants = "".join(textwrap.dedent(f"""
        [[variant]]
        id = "{vid}"
        category = "{'mandatory' if i == 0 else 'useful'}"
        command = "{command}"
        minutes = 10
        """) for i, (vid, command) in enumerate(zip(("control", "lr5"), commands)))
    path = tmp_path / "campaign.toml"
    path.write_text(textwrap.dedent("""
        [campaign]
        name = "wlm"
        question = "does lr 5 beat lr 20?"
        metric = "val_loss"
        direction = "min"

        [[lot]]
        gpu = "cpu"
        hours = 2
        price_usd = 1.0

        [metrics]
        preset = "pytorch_examples"
        """) + variants)
    (tmp_path / "main.py").write_text(WLM_ARGS)
    return path


def test_check_warns_that_the_default_save_path_is_shared_by_every_run(tmp_path):
    path = plan(tmp_path, "python main.py --lr 20", "python main.py --lr 5")
    proc = check(str(path))
    assert proc.returncode == 0, proc.stderr  # a warning, never an error
    (line,) = [x for x in proc.stdout.splitlines() if "without --save" in x]
    assert line == ("warning (paths): control, lr5 run main.py without --save: its default "
                    "(--save model.pt, main.py line 12) makes every run write the same "
                    "model.pt in the campaign folder (the working directory), each run "
                    "overwriting the last and none in its run directory; pass --save "
                    "{run_dir}/model.pt in the command")
    data = json.loads(check("--json", str(path)).stdout)
    shared = [w for w in data["shared_paths"] if w["option"] == "--save"]
    assert shared[0]["path"] == "model.pt" and shared[0]["variants"] == ["control", "lr5"]
    assert not [w for w in data["shared_paths"] if w["option"] in ("--data", "--onnx-export")]


def test_passing_the_option_under_run_dir_silences_it(tmp_path):
    path = plan(tmp_path, "python main.py --lr 20 --save {run_dir}/model.pt",
                "python main.py --lr 5 --save={run_dir}/model.pt")
    out = check(str(path)).stdout
    assert "model.pt" not in out


def test_the_defaults_are_read_statically_and_a_computed_one_is_left_alone(tmp_path):
    script = tmp_path / "t.py"
    script.write_text(WLM_ARGS + "parser.add_argument('-o', '--out', default=os.path.join("
                      "os.environ['ITERA_RUN_DIR'], 'x.pt'))\n")
    found = {d.option: (d.value, d.line) for d in argparse_defaults(script)}
    assert found["--save"] == ("model.pt", 12) and found["--data"][0] == "./data/wikitext-2"
    assert "--out" not in found  # computed at run time: not readable, not guessed
    script.write_text("def broken(:\n")
    assert argparse_defaults(script) == ()
