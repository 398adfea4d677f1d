"""The verifier's loaders for files the SDK did not write, with the real frameworks.

Every file is made by its real writer (torch.save, Lightning's Trainer,
transformers' save_pretrained, safetensors) and checked by the real
`--serve` verifier, all in one process. A pickle needing a class that is
neither torch's nor the campaign's is named and never unpickled.
"""

import json
import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from tui.engine.checkpoints.verifier import VerifierClient

pytestmark = pytest.mark.slow  # process tests: real runs, engines, verifiers

WLM = Path(__file__).parent / "scripts" / "wlm"


def _lightning_checkpoint(root: Path) -> Path:
    import lightning as L

    class Tiny(L.LightningModule):
        def __init__(self, lr=0.1):
            super().__init__()
            self.save_hyperparameters()
            self.layer = torch.nn.Linear(2, 1)

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)

    data = torch.utils.data.TensorDataset(torch.randn(8, 2), torch.randn(8, 1))
    trainer = L.Trainer(max_epochs=1, logger=False, enable_progress_bar=False,
                        enable_model_summary=False, default_root_dir=str(root / "pl"))
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=4))
    [ckpt] = (root / "pl").rglob("*.ckpt")
    return ckpt


def _hf_checkpoint(root: Path) -> Path:
    from transformers import GPT2Config, GPT2LMHeadModel, TrainingArguments

    out = root / "out" / "checkpoint-6"
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=16, vocab_size=64,
                                       n_positions=32))
    model.save_pretrained(out)
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randint(0, 64, (1, 8)), labels=torch.randint(0, 64, (1, 8))).loss.backward()
    optimizer.step()
    torch.save(optimizer.state_dict(), out / "optimizer.pt")
    torch.save({"python": random.getstate(), "numpy": np.random.get_state(),
                "cpu": torch.random.get_rng_state()}, out / "rng_state.pth")  # as HF does
    (out / "trainer_state.json").write_text(json.dumps({"global_step": 6, "log_history": []}))
    torch.save(TrainingArguments(output_dir=str(root / "out"), report_to=[], use_cpu=True),
               out / "training_args.bin")
    return out


class _Boom:
    """Unpickled, it would run `touch <mark>` through os.system."""

    def __init__(self, mark: Path):
        self.mark = mark

    def __reduce__(self):
        return os.system, ("touch " + str(self.mark),)


def _os_system_pickle(root: Path) -> Path:
    path = root / "os_system.pt"
    torch.save({"x": _Boom(root / "pwned")}, path)
    return path


def _main_pickle(root: Path) -> Path:
    path = root / "main_class.pt"
    script = textwrap.dedent(f"""
        import torch
        class Net(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = torch.nn.Linear(2, 2)
        torch.save(Net(), {str(path)!r})
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120)
    return path


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("loaders")
    code = root / "campaign"
    code.mkdir()
    shutil.copy(WLM / "model.py", code / "model.py")
    sys.path.insert(0, str(code))
    try:
        import model as campaign_model

        module = campaign_model.RNNModel("LSTM", 10, 8, 8, 1, dropout=0.0)
        torch.save(module, root / "module.pt")
        torch.save({"init": torch.nn.init.normal_}, root / "torch_function.pt")
        torch.save(torch.nn.TransformerEncoderLayer(8, 2, 16, batch_first=True),
                   root / "encoder.pt")  # stores F.relu, a function, as its activation
        torch.save({"f": torch.nn.functional.handle_torch_function}, root / "dispatch.pt")
    finally:
        sys.path.remove(str(code))
        sys.modules.pop("model", None)
    torch.save({"w": torch.ones(2)}, root / "legacy.pt", _use_new_zipfile_serialization=False)
    torch.save({"state": np.random.get_state()}, root / "numpy_state.pt")
    from safetensors.torch import save_file

    save_file({"a": torch.zeros(3), "b": torch.ones(2, 2)}, root / "weights.safetensors")
    blob = (root / "weights.safetensors").read_bytes()
    (root / "cut.safetensors").write_bytes(blob[:-5])
    hf = _hf_checkpoint(root)
    trl_ckpt = hf.parent / "checkpoint-8"
    shutil.copytree(hf, trl_ckpt)
    from trl import SFTConfig

    torch.save(SFTConfig(output_dir=str(root / "out"), max_length=48, report_to=[],
                         use_cpu=True), trl_ckpt / "training_args.bin")
    hostile = hf.parent / "checkpoint-9"
    shutil.copytree(hf, hostile)
    torch.save(_Boom(root / "pwned"), hostile / "training_args.bin")
    broken = hf.parent / "checkpoint-7"
    shutil.copytree(hf, broken)
    os.truncate(broken / "model.safetensors", 100)
    files = {"module": (root / "module.pt", code), "module-no-code": (root / "module.pt", None),
             "torch-function": (root / "torch_function.pt", code),
             "encoder": (root / "encoder.pt", None), "dispatch": (root / "dispatch.pt", None),
             "os-system": (_os_system_pickle(root), code),
             "main": (_main_pickle(root), code), "legacy": (root / "legacy.pt", None),
             "numpy": (root / "numpy_state.pt", None),
             "safetensors": (root / "weights.safetensors", None),
             "cut": (root / "cut.safetensors", None),
             "lightning": (_lightning_checkpoint(root), None), "hf": (hf, None),
             "hf-broken": (broken, None), "hf-trl": (trl_ckpt, None),
             "hf-hostile-args": (hostile, None)}
    with VerifierClient() as client:
        ids = {client.submit(path, code_dir=code_dir): name
               for name, (path, code_dir) in files.items()}
        out = {ids[v.id]: v for v in client.wait(timeout=300)}
        assert client.started == 1
    assert not (root / "pwned").exists()  # no pickle ran its payload, read as data or not
    return out


def test_a_pickled_module_reloads_with_the_campaigns_classes_only(verdicts):
    ok = verdicts["module"]
    assert ok.ok and ok.kind == "module" and "model.RNNModel" in ok.needs
    assert ok.summary.startswith("a pickled model.RNNModel module")
    refused = verdicts["module-no-code"]
    assert not refused.ok and refused.problem.startswith("needs model.RNNModel (neither")
    assert refused.problem.endswith("not unpickled")


def test_torch_functions_load_as_torch_weights_only_would_and_nothing_else(verdicts):
    assert verdicts["torch-function"].ok, verdicts["torch-function"].problem
    encoder = verdicts["encoder"]
    assert encoder.ok, encoder.problem
    assert encoder.summary.startswith("a pickled torch.nn.modules.transformer."
                                      "TransformerEncoderLayer module")
    assert "torch.nn.functional.relu" in encoder.needs
    assert verdicts["dispatch"].problem.startswith(
        "needs torch.overrides.handle_torch_function (neither torch's")
    assert verdicts["os-system"].problem.startswith("needs posix.system (neither torch's")
    assert not (verdicts["os-system"].summary or "")


def test_script_classes_are_not_rebuilt(verdicts):
    main = verdicts["main"].problem
    assert main.startswith("needs __main__.Net defined in the training script itself")
    assert "define the class in a module file of the campaign folder" in main


def test_plain_torch_numpy_and_safetensors_files(verdicts):
    assert verdicts["legacy"].ok and verdicts["legacy"].kind == "state_dict"
    assert verdicts["numpy"].ok and any(n.startswith("numpy") for n in verdicts["numpy"].needs)
    assert verdicts["safetensors"].ok and verdicts["safetensors"].summary == (
        "2 tensors (safetensors)")
    assert verdicts["cut"].problem.startswith("not a loadable safetensors file:")


def test_a_lightning_checkpoint(verdicts):
    v = verdicts["lightning"]
    assert v.ok and v.format == "lightning" and v.kind == "checkpoint" and v.step == 2


def test_an_hf_checkpoint_directory_every_file(verdicts):
    v = verdicts["hf"]
    assert v.ok, v.problem
    assert v.format == "hf" and v.kind == "checkpoint" and v.step == 6 and v.files == 7
    assert len(v.sha256) == 64
    [note] = v.notes
    assert note == ("training_args.bin: the training arguments of transformers.training_args."
                    "TrainingArguments (%s fields), read as data, never unpickled"
                    % note.split("(")[1].split()[0])
    trl_args = verdicts["hf-trl"]
    assert trl_args.ok, trl_args.problem
    assert trl_args.notes[0].startswith("training_args.bin: the training arguments of "
                                        "trl.trainer.sft_config.SFTConfig (")
    assert verdicts["hf-hostile-args"].problem.startswith(
        "training_args.bin: needs posix.system (neither torch's")
    assert verdicts["hf-broken"].problem.startswith("model.safetensors: not a loadable "
                                                    "safetensors file")
