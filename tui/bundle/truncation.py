"""The data check's truncation counts, per variant, as the bundle keeps and reports them.

`python -m tui.integrations.data_check` writes `data_check.json` in its run
directory: per variant, its max length and how many corpus examples exceed it
(what the trainer will cut without a word). The manifest's entry of that step
keeps the table (`truncation`) and the report says it per variant, since a
variant with a shorter max length trains on less of the corpus: a cause of its
result as real as the factor it was meant to vary. Stdlib only; a damaged or
foreign file is no table, never a crash.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..campaign.finetune_files import DATA_CHECK_FILE as RESULT_FILE


def read(run_dir: Path) -> dict | None:
    """{"tokenizer", "examples", "variants": [{variant, category, max_length, longer}]}."""
    try:
        data = json.loads((Path(run_dir) / RESULT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("variants"), list):
        return None
    rows = []
    for row in data["variants"]:
        if isinstance(row, dict) and isinstance(row.get("variant"), str):
            rows.append({k: row.get(k) if isinstance(row.get(k), (int, str, type(None)))
                         and not isinstance(row.get(k), bool) else None
                         for k in ("variant", "category", "max_length", "longer")})
    examples = data.get("examples")
    return {"tokenizer": str(data.get("tokenizer") or "?"),
            "examples": examples if isinstance(examples, int) else None, "variants": rows}


def run_fields(run_dir: Path) -> dict:
    """A run entry's `truncation` table, when the run is a data check ({} otherwise)."""
    table = read(run_dir)
    return {"truncation": table} if table else {}


def report_lines(runs: list[dict]) -> list[str]:
    out = []
    for r in runs:
        table = r.get("truncation")
        if not table:
            continue
        total = table.get("examples")
        out += [f"Data check `{r['id']}`: corpus examples longer than each variant's max "
                f"length (tokenizer `{table.get('tokenizer')}`, {total} examples), cut by the "
                "trainer without a word:", ""]
        for row in table["variants"]:
            if row.get("longer") is None:
                out.append(f"- `{row['variant']}`: no max length given")
            else:
                share = f" ({row['longer'] / total:.0%})" if total else ""
                out.append(f"- `{row['variant']}` ({row.get('category')}, max length "
                           f"{row.get('max_length')}): {row['longer']} of {total}{share}")
        out.append("")
    return out
