"""The adapters of a bundle: which base each needs, at which exact revision, and how to reload it.

A run's adapter (a deliverable folder, or its bundled `checkpoint-N/`) was
checked by the verifier (`tui.training.adapters`): its tensors, its base and
the revision that pins it, and whether it loaded onto that base here. This
module turns those verdicts into the manifest's run entry (`adapters`,
`base_model`, `base_model_revision`), the report's sentences and RELOAD.md's
lines (`PeftModel.from_pretrained` on the base at its pinned revision). A base
that could not be pinned is said so in all three, never guessed. Stdlib only.
"""

from __future__ import annotations

import json

from ..campaign.finetune_files import is_adapter

__all__ = ["base_fields", "entry", "run_fields", "intro", "is_adapter", "pin_text", "prelude", "reload_lines",
           "report_lines"]
_TASK_CLASS = {"CAUSAL_LM": "AutoModelForCausalLM", "SEQ_CLS": "AutoModelForSequenceClassification",
               "SEQ_2_SEQ_LM": "AutoModelForSeq2SeqLM",
               "TOKEN_CLS": "AutoModelForTokenClassification",
               "QUESTION_ANS": "AutoModelForQuestionAnswering"}


def entry(rel: str, role: str, adapter: dict) -> dict:
    """The manifest's record of one bundled adapter."""
    return {"path": rel, "role": role} | {k: adapter.get(k) for k in (
        "base", "base_kind", "revision", "pinned_by", "unpinned", "loaded_on_base",
        "load_note", "peft_type", "task_type", "r", "lora_alpha")}


def run_fields(adapters: list[dict]) -> dict:
    """A run entry's `adapters`, `base_model` and `base_model_revision` (none: {})."""
    return {"adapters": adapters} | base_fields(adapters) if adapters else {}


def base_fields(adapters: list[dict]) -> dict:
    """`base_model` / `base_model_revision` of a run, from its adapters (a deliverable first)."""
    if not adapters:
        return {}
    first = sorted(adapters, key=lambda a: a.get("role") != "artifact")[0]
    out = {"base_model": first.get("base")}
    if first.get("revision"):
        out["base_model_revision"] = first["revision"]
    return out


def pin_text(a: dict) -> str:
    base, rev = _one_line(a.get("base") or "?"), a.get("revision")
    rev = _one_line(rev) if rev else rev
    if a.get("pinned_by") == "content_digest":
        return (f"base model: the local folder `{base}` (not in the bundle), pinned by the "
                f"content digest `{rev}` of its config.json and weights")
    if rev and not a.get("unpinned"):
        how = {"hub_cache": "the commit of the snapshot the run loaded, from the local hub "
                            "cache", "adapter_config": "the adapter config's revision"}.get(
            a.get("pinned_by"), "pinned")
        return f"base model `{base}` at revision `{rev}` ({how})"
    if rev:
        return f"base model `{base}` at `{rev}`, NOT pinned: {_one_line(a.get('unpinned'))}"
    why = _one_line(a.get("unpinned") or "unknown")
    return f"base model `{base}`: revision NOT pinned ({why})"


def report_lines(runs: list[dict]) -> list[str]:
    """One sentence per adapter (or per typed `base_model_revision` param)."""
    out = []
    for r in runs:
        adapters = r.get("adapters") or []
        for a in adapters:
            loaded = "loaded onto its base in a fresh process" if a.get("loaded_on_base") \
                else (a.get("load_note") or "not loaded on its base")
            out.append(f"Run `{r['id']}`: adapter `{a['path']}`: {pin_text(a)}; {loaded}.")
        if not adapters and r.get("base_model_revision"):
            out.append(f"Run `{r['id']}` is an adapter on base model "
                       f"`{r.get('base_model') or '?'}` at revision `{r['base_model_revision']}`.")
    return out + [""] if out else []


def intro(adapters: list[dict]) -> list[str]:
    """What RELOAD.md's adapter lines need beyond torch."""
    if not adapters:
        return []
    return ["The adapters below load onto their base model with PEFT: `pip install "
            "transformers peft safetensors`. Each names its base and the exact revision that "
            "pins it; a base that could not be pinned is said so.", ""]


def _one_line(text) -> str:
    """Text a run wrote (a base name, a revision), safe inside a comment or a sentence."""
    return "".join(c if c.isprintable() else "?" for c in str(text))


def reload_lines(rel: str, a: dict, name: str) -> list[str]:
    """RELOAD.md's Python for one adapter: its base at the pinned revision, then PEFT.
    What the adapter config said (base, revision) goes in as string literals, never code."""
    cls = _TASK_CLASS.get(a.get("task_type") or "", "AutoModel")
    base, rev = json.dumps(str(a.get("base") or "?")), json.dumps(str(a.get("revision")))
    lines = [f"# {_one_line(rel)}: a {_one_line(a.get('peft_type') or 'PEFT')} adapter; "
             f"{pin_text(a)}",
             f"from transformers import {cls}", "from peft import PeftModel"]
    if a.get("pinned_by") == "content_digest":
        lines += [f"{name}_base_dir = Path({base})  # the base folder, where you keep it",
                  f'assert base_digest({name}_base_dir) == {rev}, "not the base it was '
                  'trained on"',
                  f"{name}_base = {cls}.from_pretrained({name}_base_dir)"]
    elif a.get("revision"):
        lines.append(f"{name}_base = {cls}.from_pretrained({base}, revision={rev})")
    else:
        lines += ["# the exact base revision is not known: check the base before trusting this",
                  f"{name}_base = {cls}.from_pretrained({base})"]
    lines += [f"{name} = PeftModel.from_pretrained({name}_base, checked_dir({json.dumps(rel)}))",
              f"{name}.eval()"]
    return lines


def prelude(adapters: list[dict]) -> list[str]:
    """Helpers RELOAD.md needs once when it reloads adapters."""
    if not adapters:
        return []
    lines = ["def checked_dir(rel):",
             '    """A bundle folder, once every file in it matches manifest.json."""',
             '    for name, entry in listed.items():',
             '        if name.startswith(rel + "/"):',
             "            checked(name)",
             "    return bundle / rel", "", ""]
    if any(a.get("pinned_by") == "content_digest" for a in adapters):
        lines += ["def base_digest(folder):",
                  '    """sha256 of a base folder\'s config.json and weights, as '
                  'itera-tui pins it."""',
                  "    names = sorted(p.name for p in Path(folder).iterdir() if p.is_file() and "
                  '(p.name == "config.json" or p.suffix == ".safetensors" or (p.suffix == '
                  '".bin" and p.name.startswith(("model", "pytorch_model")))))',
                  '    listing = "".join(f"{hashlib.sha256((Path(folder) / n).read_bytes())'
                  '.hexdigest()}  {n}\\n" for n in names)',
                  '    return "sha256:" + hashlib.sha256(listing.encode()).hexdigest()', "", ""]
    return lines
