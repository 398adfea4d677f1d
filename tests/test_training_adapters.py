"""PEFT adapters in the real `--serve` verifier: finite tensors, the base pinned, loaded onto it.

The base is a one-layer GPT-2 built from a config with a locally trained
tokenizer (tests/peftkit.py); the adapters are real PEFT LoRA saves. Nothing is
downloaded: the hub case is huggingface_hub's cache layout in a temp folder,
with HF_HUB_OFFLINE=1.
"""

import json
import os

import pytest

from peftkit import build_base, fake_hub_cache, make_adapter
from tui.engine.checkpoints.verifier import VerifierClient

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapters")
    campaign = root / "campaign"
    campaign.mkdir()
    base = build_base(campaign / "base")
    cache = root / "hub"
    commit = fake_hub_cache(cache, "org/tiny", base, commit="c0ffee" + "0" * 34)
    cases = {
        "local": make_adapter(base, campaign / "local", base_name="base"),  # as a script
        # run from the campaign folder names it; an absolute path is never written out
        "absolute": make_adapter(base, campaign / "absolute"),
        "nan": make_adapter(base, campaign / "nan", nan=True),
        "hub": make_adapter(base, campaign / "hub", base_name="org/tiny"),
        "absent": make_adapter(base, campaign / "absent", base_name="org/elsewhere"),
        "gone": make_adapter(base, campaign / "gone", base_name="./no_such_base"),
    }
    wrong = make_adapter(base, campaign / "wrong", r=4)
    from transformers import GPT2Config, GPT2LMHeadModel

    GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=48, vocab_size=64)).save_pretrained(
        campaign / "other")
    config = json.loads((wrong / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = "other"
    (wrong / "adapter_config.json").write_text(json.dumps(config))
    cases["wrong"] = wrong
    env = dict(os.environ, HF_HUB_CACHE=str(cache), HF_HUB_OFFLINE="1")
    with VerifierClient(env=env, cwd=root) as client:
        ids = {client.submit(path, code_dir=campaign): name for name, path in cases.items()}
        out = {ids[v.id]: v for v in client.wait(timeout=300)}
    blocker = root / "no_peft"
    (blocker / "peft").mkdir(parents=True)
    (blocker / "peft" / "__init__.py").write_text("raise ImportError('peft is blocked here')\n")
    with VerifierClient(env=env | {"ITERA_ADAPTER_BASE_MAX_GB": "0.000001"},
                        cwd=root) as client:
        out["heavy"] = client.verify(cases["local"], code_dir=campaign)
    env["PYTHONPATH"] = str(blocker)
    with VerifierClient(env=env, cwd=root) as client:
        out["no-peft"] = client.verify(cases["local"], code_dir=campaign)
    out["commit"] = commit
    return out


def test_an_adapter_on_a_local_base_is_pinned_by_digest_and_loaded_onto_it(verdicts):
    v = verdicts["local"]
    assert v.ok, v.problem
    assert v.kind == "adapter" and v.summary.startswith("a LORA adapter (r=4) on base")
    a = v.adapter
    assert (a.base, a.base_kind, a.pinned_by) == ("base", "local", "content_digest")
    assert a.revision.startswith("sha256:") and len(a.revision) == 7 + 64
    assert a.loaded_on_base and a.load_note.startswith("loaded onto its base with PEFT ")
    assert a.load_note.endswith("2 tensors, equal to the file's")
    assert (a.r, a.lora_alpha, a.task_type) == (4, 8.0, "CAUSAL_LM")


def test_an_absolute_base_path_is_shown_by_its_folder_name(verdicts):
    a = verdicts["absolute"].adapter
    assert verdicts["absolute"].ok and a.base == "<absolute path>/base"
    assert a.revision == verdicts["local"].adapter.revision and a.loaded_on_base


def test_an_adapter_of_nan_never_reloads_ok(verdicts):
    v = verdicts["nan"]
    assert not v.ok and v.adapter is None
    assert v.non_finite  # one finite test and wording for every format (training.finite)
    assert v.problem.startswith("adapter_model.safetensors: non-finite weights: 1 of 2 tensors "
                                "hold NaN or inf (")


def test_a_hub_base_is_pinned_to_the_cached_snapshot_commit(verdicts):
    a = verdicts["hub"].adapter
    assert verdicts["hub"].ok, verdicts["hub"].problem
    assert (a.base, a.base_kind, a.revision, a.pinned_by) == (
        "org/tiny", "hub", verdicts["commit"], "hub_cache")
    assert a.loaded_on_base  # from the snapshot folder, offline


def test_a_base_not_on_this_box_is_said_never_guessed(verdicts):
    absent = verdicts["absent"]
    assert absent.ok and absent.adapter.revision is None and absent.adapter.pinned_by is None
    assert absent.adapter.unpinned == ("org/elsewhere is not in the local hub cache "
                                       "(HF_HUB_CACHE / HF_HOME)")
    assert not absent.adapter.loaded_on_base
    assert absent.adapter.load_note.startswith("not loaded on its base: the base is not on "
                                               "this box (org/elsewhere is not in the local")
    gone = verdicts["gone"].adapter
    assert gone.unpinned == "the base folder './no_such_base' is not on this box"


def test_an_adapter_that_does_not_fit_its_base_fails(verdicts):
    v = verdicts["wrong"]
    assert not v.ok
    assert v.problem.startswith("adapter: does not load onto its base other: ")


def test_without_peft_the_tensors_are_still_checked_and_the_verdict_says_so(verdicts):
    v = verdicts["no-peft"]
    assert v.ok, v.problem
    assert not v.adapter.loaded_on_base and v.adapter.pinned_by == "content_digest"
    assert v.adapter.load_note == ("not loaded on its base: peft is not importable here "
                                   "(pip install 'itera-tui[peft]'); its tensors were checked")


def test_a_base_heavier_than_the_limit_is_not_loaded_and_said_so(verdicts):
    v = verdicts["heavy"]
    assert v.ok and not v.adapter.loaded_on_base and v.adapter.pinned_by == "content_digest"
    assert v.adapter.load_note.startswith("not loaded on its base: the base weighs 0.0 GB, "
                                          "over the 0.0 GB the verifier loads on CPU "
                                          "(ITERA_ADAPTER_BASE_MAX_GB)")
