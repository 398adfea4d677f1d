"""The data check's truncation counts, one line for the decision point.

A variant with a shorter max length trains on less of the corpus; the person
choosing to continue or drop should see it beside the pilot figures. The
table is the data check step's `data_check.json` (written by
`tui.integrations.data_check`, read by `tui.bundle.truncation`), read once
when the decision opens: a file of a few hundred bytes.
"""

from __future__ import annotations

from ..bundle.truncation import read


def truncation_text(plan, state) -> str:
    """"examples over each variant's max length (data check): control 20/200 (24), ..."."""
    steps = [r for r in state.runs if r.kind == "step"]
    for run in reversed(steps):
        table = read(plan.state_dir / "runs" / run.id)
        if table and table["variants"]:
            total = table.get("examples")
            parts = [f"{row['variant']} {row['longer']}/{total} (max {row['max_length']})"
                     for row in table["variants"] if row.get("longer") is not None]
            if parts:
                return ("examples over each variant's max length (data check, cut silently "
                        "by the trainer): " + ", ".join(parts))
    return ""
