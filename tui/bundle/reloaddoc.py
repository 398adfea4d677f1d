"""RELOAD.md: how to get each artifact and checkpoint of the bundle back into Python.

The snippet is one runnable block with paths relative to the bundle, so it
works wherever the bundle is copied (the tests run it in a fresh process).
It uses the SDK's loaders (`training.load_artifact`, `training.load_checkpoint`),
which load with weights_only=True. For an adapter, the exact base model
revision from the plan is repeated next to the weights that need it.
"""

from __future__ import annotations

import json
import keyword
import re
from pathlib import Path

from .. import __version__


def _identifier(name: str) -> str:
    ident = re.sub(r"\W", "_", name)
    return ident if ident.isidentifier() and not keyword.iskeyword(ident) else f"v_{ident}"


def _meta(bundle: Path, rel: str) -> dict:
    try:
        meta = json.loads((bundle / (rel + ".json")).read_text()).get("meta")
    except (OSError, ValueError, AttributeError):
        return {}
    return meta if isinstance(meta, dict) else {}


def render(bundle: Path, runs: list[dict]) -> str:
    """`runs`: manifest run entries (id, variant, checkpoint, checkpoint_step, artifacts...)."""
    lines = ["# Reloading this bundle", "",
             "Everything below is relative to this bundle's directory: run the snippet from "
             "there (`cd` into the copied bundle). It needs Python with torch and the "
             f"itera-tui package (version {__version__}: `pip install itera-tui=={__version__}`, "
             "or put its source directory on `PYTHONPATH`).", "",
             "Check the bundle first: `itera-tui verify .` re-hashes every file against "
             "`manifest.json` and reloads every checkpoint and artifact in a fresh process.",
             ""]
    loads = [r for r in runs if r.get("artifacts") or r.get("checkpoint")]
    if not loads:
        lines += ["This bundle holds no checkpoint or artifact to reload: no run left a "
                  "verified checkpoint or a model file (see `report.md` and `stops.json`).", ""]
        return "\n".join(lines)
    lines += ["## Files", ""]
    for r in loads:
        revision = r.get("base_model_revision")
        base = (f"; adapter on base model `{r.get('base_model') or '?'}` at revision "
                f"`{revision}` (load exactly that revision first)" if revision else "")
        for rel in r.get("artifacts", []):
            lines.append(f"- `{rel}`: artifact of run `{r['id']}` ({r['variant']}){base}")
        if r.get("checkpoint"):
            lines.append(f"- `{r['checkpoint']}`: last verified checkpoint of run `{r['id']}` "
                         f"(step {r.get('checkpoint_step')}), for a resume{base}")
    lines += ["", "## Python", "", "```python", "from pathlib import Path", "",
              "from tui import training", "",
              'bundle = Path(".")  # this bundle\'s directory', ""]
    for r in loads:
        var = _identifier(r["id"])
        if r.get("base_model_revision"):
            lines.append(f"# {r['id']}: base model {r.get('base_model') or '?'!s} at revision "
                         f"{r['base_model_revision']}")
        for i, rel in enumerate(r.get("artifacts", [])):
            name = f"{var}_artifact" + (f"_{i}" if i else "")
            meta = _meta(bundle, rel)
            lines.append(f'{name} = training.load_artifact(bundle / "{rel}")')
            lines.append(f'print("{rel}", sorted({name}["state_dict"]), {name}["meta"])')
            hint = meta.get("reload") or meta.get("model")
            if isinstance(hint, str) and hint:
                lines.append(f"# rebuild the model: {hint}")
            lines.append(f'# then: model.load_state_dict({name}["state_dict"])')
        if r.get("checkpoint"):
            name = f"{var}_checkpoint"
            lines.append(f'{name} = training.load_checkpoint(bundle / "{r["checkpoint"]}", '
                         f"restore_rng=False)")
            lines.append(f'print("{r["checkpoint"]}", "step", {name}["step"])')
            lines.append("# to resume: training.load_checkpoint(path, model=model, "
                         "optimizer=optimizer, scheduler=scheduler)")
        lines.append("")
    lines += ["```", ""]
    return "\n".join(lines)
