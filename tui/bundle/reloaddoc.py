"""RELOAD.md: how to get each artifact and checkpoint of the bundle back into Python.

The snippet is one runnable block with paths relative to the bundle, so it
works wherever the bundle is copied (the tests run it in a fresh process with
no itera-tui importable). It needs torch alone (and numpy, without which
torch's import warns): the SDK's files are plain
torch dictionaries, read with `torch.load(weights_only=True)` like any other
(`safetensors` for `.safetensors` files), each after its sha256 is checked
against manifest.json with hashlib; itera-tui is named only for what needs it
(`itera-tui verify`, the SDK's RNG-restoring resume), with how to install it
from its source, since it is not on PyPI;
a pickled module is loaded with the classes it needs allowed by name
(`torch.serialization.safe_globals`), the campaign's own imported from the
bundle's `code/` copy. An SDK artifact whose meta names a builder
(`tui.bundle.code.model_entries`) is rebuilt into a model from that copy too,
and where it names a `predict` function the snippet redoes the run's
predictions from the corpus files plan.toml pins (each checked against its
sha256) and compares them with the run's own `predictions.jsonl`. For an
adapter, the exact base model revision from the plan is repeated next to the
weights that need it, and a PEFT adapter gets the lines that load it onto
that base (`tui.bundle.adapters`). The snippet writes no bytecode
(`sys.dont_write_bytecode`): importing `code/` must not leave files in the
bundle that its own verification would then have to explain.
"""

from __future__ import annotations

import json
import keyword
import re
from pathlib import Path

from .. import __version__
from . import adapters as adapter_lines


def _identifier(name: str) -> str:
    ident = re.sub(r"\W", "_", name)
    return ident if ident.isidentifier() and not keyword.iskeyword(ident) else f"v_{ident}"


def _meta(bundle: Path, rel: str) -> dict:
    try:
        meta = json.loads((bundle / (rel + ".json")).read_text()).get("meta")
    except (OSError, ValueError, AttributeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _sdk(bundle: Path, rel: str) -> bool:
    return (bundle / (rel + ".json")).is_file()


def _allowed_block(needs: list[str]) -> list[str]:
    names = ", ".join(repr(n) for n in needs)
    return [f"with torch.serialization.safe_globals(allowed([{names}])):"]


def _foreign_load(bundle: Path, rel: str, name: str, needs: list[str]) -> list[str]:
    """Lines loading a file or directory no SDK sidecar describes."""
    if (bundle / rel).is_dir():
        return [f'{name} = {{f.name: load_file(checked(f.relative_to(bundle).as_posix())) '
                f'for f in sorted((bundle / "{rel}").glob("*.safetensors"))}}',
                f'print("{rel}", {{k: len(v) for k, v in {name}.items()}})',
                "# with transformers: AutoModelForCausalLM.from_pretrained(bundle / "
                f'"{rel}"), or Trainer.train(resume_from_checkpoint=...)']
    if rel.lower().endswith(".safetensors"):
        return [f'{name} = load_file(checked("{rel}"))', f'print("{rel}", sorted({name}))']
    load = _torch_load(name, rel)
    if needs:
        return [*_allowed_block(needs), "    " + load, f'print("{rel}", type({name}).__name__)']
    return [load, f'print("{rel}", type({name}).__name__)']


def _torch_load(name: str, rel: str) -> str:
    return f'{name} = torch.load(checked("{rel}"), map_location="cpu", weights_only=True)'


PIP_INSTALL = "pip install torch numpy"  # what a reader installs: tests install exactly this


def _intro() -> list[str]:
    return [
        "# Reloading this bundle", "",
        "Everything below is relative to this bundle's directory: run the snippet from there "
        "(`cd` into the copied bundle, save the block as `reload.py`, `python reload.py`). It "
        "needs Python with torch and nothing else but numpy, which torch warns about "
        "(\"Failed to initialize NumPy\") when it is missing "
        f"(`{PIP_INSTALL}`; `pip install safetensors` too when a file below ends in "
        "`.safetensors`). Files written by the itera-tui SDK are plain torch dictionaries "
        "(`state_dict` and `meta` for an artifact; `step`, `model`, `optimizer`, `scheduler`, "
        "`scaler` and `rng` for a checkpoint), so `torch.load(..., weights_only=True)` reads "
        "them. The snippet checks each file's sha256 against `manifest.json` before "
        "loading it.", "",
        "With the itera-tui package you can also re-verify the whole bundle (`itera-tui "
        "verify .`: every file re-hashed, every checkpoint and artifact reloaded in a fresh "
        "process) and resume with the SDK's loader, which restores the RNG states too "
        "(`training.load_checkpoint(path, model=..., optimizer=...)`). itera-tui is not "
        f"published on PyPI: install version {__version__} from its source repository "
        "(`pip install <itera-tui checkout>`, or put that checkout on `PYTHONPATH`).", ""]


def _corpus_intro(root: str | None = None) -> list[str]:
    """Where the corpus comes from: the bundle does not hold it, so the person copying
    the bundle off the box is told which folder to copy beside it (`root`, the plan's
    `[corpus] root`, only when it is relative to the campaign folder: an absolute one is
    a machine path, never written into the bundle)."""
    if root and not root.startswith(("/", "~")) and ".." not in Path(root).parts:
        where = (f" On the box they are in `{root}/` under the campaign folder: "
                 f"`rsync -avP '<user>@<box>:<campaign-dir>/{root}/' corpus/` copies them "
                 "here.")
    else:
        where = " On the box they are in the folder `[corpus] root` names."
    return ["To redo a run's predictions the snippet needs the corpus: the files `plan.toml` "
            "pins under `[corpus]` (each name with its sha256); the bundle does not hold "
            "them." + where + " Put them in a folder `corpus/` here, or name their folder "
            "with `ITERA_CORPUS=/path/to/them python reload.py`; each file is checked "
            "against its pinned sha256 before it is read.", ""]


def _corpus_lines() -> list[str]:
    return ["import os", "import tomllib", "", "",
            "def checked_corpus():",
            '    """The corpus folder, once each file matches its sha256 in plan.toml; None',
            '    when there is none here (the predictions are then not redone)."""',
            '    corpus = Path(os.environ.get("ITERA_CORPUS", "corpus"))',
            "    if not corpus.is_dir():",
            '        print(f"no corpus folder {corpus}: the predictions are not redone")',
            "        return None",
            '    pinned = tomllib.loads((bundle / "plan.toml").read_text())["corpus"]["files"]',
            "    for name, sha256 in pinned.items():",
            "        if hashlib.sha256((corpus / name).read_bytes()).hexdigest() != sha256:",
            '            raise SystemExit(f"{corpus / name}: not the corpus file plan.toml pins")',
            "    return corpus",
            "", "",
            "def compare(rel, text):",
            '    """Redone predictions against the run\'s own file: ids, labels and',
            '    predictions exactly, confidences to 1e-5."""',
            "    theirs = [json.loads(line) for line in (bundle / rel).read_text().splitlines()]",
            "    ours = [json.loads(line) for line in text.splitlines()]",
            "    same = sum(a == b or (a.keys() == b.keys() and all(",
            '        abs(a[k] - b[k]) <= 1e-5 if k == "confidence" else a[k] == b[k] for k in a))',
            "        for a, b in zip(ours, theirs))",
            "    if len(ours) != len(theirs) or same != len(theirs):",
            '        raise SystemExit(f"{rel}: {same} of {len(theirs)} predictions reproduced")',
            '    print(f"{rel}: reproduced, {same} of {len(theirs)} predictions")', "", ""]


def _rebuild_lines(bundle: Path, rel: str, name: str, rebuild: dict) -> list[str]:
    """Lines turning a loaded SDK artifact `name` into a model, and redoing predictions."""
    lines = []
    if "builder" in rebuild:
        module, fn = rebuild["builder"].split(":")
        model = f"{name.removesuffix('_artifact')}_model"
        lines += [f"from {module} import {fn}  # kept in code/",
                  f'{model} = {fn}({name}["meta"])',
                  f'{model}.load_state_dict({name}["state_dict"])',
                  f"{model}.eval()", f'print("{rel}: rebuilt", type({model}).__name__)']
        predictions = f"{rel.rpartition('/')[0]}/predictions.jsonl"
        if "predict" in rebuild and (bundle / predictions).is_file():
            module, fn = rebuild["predict"].split(":")
            lines += [f"from {module} import {fn}  # kept in code/",
                      "if (corpus := checked_corpus()) is not None:",
                      f'    compare("{predictions}", {fn}({model}, {name}["meta"], corpus))']
    return lines


def _prelude(bundle: Path, loads: list[dict], code: dict) -> list[str]:
    rels = [rel for r in loads for rel in r.get("artifacts", []) + (
        [r["checkpoint"]] if r.get("checkpoint") else [])]
    lines = ["import sys", "", "sys.dont_write_bytecode = True  # importing code/ leaves no "
             "__pycache__ in the bundle (`itera-tui verify .` stays true)", "",
             "import hashlib", "import json", "from pathlib import Path", "", "import torch"]
    if any(rel.lower().endswith(".safetensors") or (bundle / rel).is_dir() for rel in rels):
        lines += ["from safetensors.torch import load_file"]
    lines += ["", 'bundle = Path(".")  # this bundle\'s directory',
              'listed = {f["path"]: f for f in json.loads((bundle / "manifest.json")'
              '.read_text())["files"]}', "", "",
              "def checked(rel):",
              '    """The bundle file at rel, once its sha256 matches manifest.json."""',
              "    path, digest = bundle / rel, hashlib.sha256()",
              "    if path.is_file():",
              '        with open(path, "rb") as f:',
              "            for block in iter(lambda: f.read(1 << 20), b\"\"):",
              "                digest.update(block)",
              '        if digest.hexdigest() != listed[rel]["sha256"]:',
              '            raise SystemExit(f"{rel}: its sha256 does not match manifest.json")',
              "    return path", "", ""]
    lines += adapter_lines.prelude([a for r in loads for a in r.get("adapters") or []])
    rebuild = code.get("rebuild") or {}
    if code.get("needs") or rebuild:
        lines += ["# the code that rebuilds the models, kept with the bundle "
                  "(each file checked first)",
                  'for rel in [r for r in listed if r.startswith("code/")]:',
                  "    checked(rel)",
                  'sys.path.insert(0, str(bundle / "code"))', "", ""]
    if any("predict" in r for r in rebuild.values()):
        lines += _corpus_lines()
    if code.get("needs"):
        lines += ["import importlib", "",
                  "def allowed(names):",
                  '    """The classes a pickled module needs, for a weights_only load."""',
                  "    out = []", "    for name in names:",
                  '        module, _, attr = name.rpartition(".")',
                  "        out.append((getattr(importlib.import_module(module), attr), name))",
                  "    return out", "", ""]
    return lines


def render(bundle: Path, runs: list[dict], code: dict | None = None,
           corpus_root: str | None = None) -> str:
    """`runs`: manifest run entries (id, variant, checkpoint, checkpoint_step, artifacts...);
    `code`: the manifest's code section (which classes each pickled file needs);
    `corpus_root`: the plan's `[corpus] root`, where the corpus is on the box."""
    code = code or {}
    needs = code.get("needs") or {}
    lines = _intro()
    loads = [r for r in runs if r.get("artifacts") or r.get("checkpoint")]
    if not loads:
        lines += ["This bundle holds no checkpoint or artifact to reload: no run left a "
                  "verified checkpoint or a model file (see `report.md` and `stops.json`).", ""]
        return "\n".join(lines)
    lines += adapter_lines.intro([a for r in loads for a in r.get("adapters") or []])
    lines += ["## Files", ""]
    for r in loads:
        revision = r.get("base_model_revision")
        base = (f"; adapter on base model `{r.get('base_model') or '?'}` at revision "
                f"`{revision}` (load exactly that revision first)" if revision else "")
        pins = {a["path"]: "; " + adapter_lines.pin_text(a) for a in r.get("adapters") or []}
        for rel in r.get("artifacts", []):
            extra = f"; a pickled module (needs {', '.join(needs[rel])})" if rel in needs else ""
            lines.append(f"- `{rel}`: artifact of run `{r['id']}` ({r['variant']}){extra}"
                         f"{pins.get(rel, base)}")
        if r.get("checkpoint"):
            lines.append(f"- `{r['checkpoint']}`: last verified checkpoint of run `{r['id']}` "
                         f"(step {r.get('checkpoint_step')}), for a resume"
                         f"{pins.get(r['checkpoint'], base)}")
    if code.get("modules"):
        lines += ["", "The code that rebuilds them (the classes pickled modules need, the "
                  "functions that rebuild a model from an artifact's meta and redo its "
                  "predictions) is kept in `code/`, imported from there by the snippet: "
                  + ", ".join(f"`{m}`" for m in code["modules"]) + "."]
    rebuild = code.get("rebuild") or {}
    if rebuild:
        lines += ["", "Models rebuilt by the snippet (torch alone): " + ", ".join(
            f"`{rel}` with `{r['builder']}`" for rel, r in rebuild.items() if "builder" in r)
            + "."]
    if any("predict" in r for r in rebuild.values()):
        lines += [""] + _corpus_intro(corpus_root)[:-1]
    lines += ["", "## Python", "", "```python", *_prelude(bundle, loads, code)]
    for r in loads:
        var = _identifier(r["id"])
        adapters = {a["path"]: a for a in r.get("adapters") or []}
        if r.get("base_model_revision") and not adapters:
            lines.append(f"# {r['id']}: base model {r.get('base_model') or '?'!s} at revision "
                         f"{r['base_model_revision']}")
        for i, rel in enumerate(r.get("artifacts", [])):
            name = f"{var}_artifact" + (f"_{i}" if i else "")
            if rel in adapters:
                lines += adapter_lines.reload_lines(rel, adapters[rel], name)
                continue
            if not _sdk(bundle, rel):
                lines += _foreign_load(bundle, rel, name, needs.get(rel, []))
                continue
            meta = _meta(bundle, rel)
            lines.append(_torch_load(name, rel))
            lines.append(f'print("{rel}", sorted({name}["state_dict"]), {name}["meta"])')
            rebuild = (code.get("rebuild") or {}).get(rel)
            if rebuild and "builder" in rebuild:
                lines += _rebuild_lines(bundle, rel, name, rebuild)
            else:
                hint = meta.get("reload") or meta.get("model")
                if isinstance(hint, str) and hint:
                    lines.append(f"# rebuild the model: {hint}")
                lines.append(f'# then: model.load_state_dict({name}["state_dict"])')
        if r.get("checkpoint"):
            name, rel = f"{var}_checkpoint", r["checkpoint"]
            if rel in adapters:
                lines += adapter_lines.reload_lines(rel, adapters[rel], name)
            elif not _sdk(bundle, rel):
                lines += _foreign_load(bundle, rel, name, needs.get(rel, []))
            else:
                lines.append(_torch_load(name, rel))
                lines.append(f'print("{rel}", "step", {name}["step"])')
                lines.append(f'# to resume: model.load_state_dict({name}["model"]), and '
                             f'optimizer.load_state_dict({name}["optimizer"]) when saved')
        lines.append("")
    lines += ["```", ""]
    return "\n".join(lines)
