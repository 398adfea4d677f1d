"""`itera-tui verify`'s words on a terminal: one verdict line, then the failures.

A hostile or broken bundle can hold hundreds of thousands of failures, and a
path or problem it names may carry escape sequences: the text output names the
first SHOWN_FAILURES and counts the rest (`--json` lists every one), each line
cleaned for the terminal (`for_terminal`).
"""

from __future__ import annotations

from ..campaign.text import for_terminal

SHOWN_FAILURES = 50


def lines(bundle, result) -> list[str]:
    """The text output of a VerifyResult for `bundle` (as the person named it)."""
    notes = [f"  note: {for_terminal(a['path'])} ({a['files']} file"
             f"{'s' if a['files'] != 1 else ''}) was {a['note']}"
             for a in getattr(result, "added", [])[:SHOWN_FAILURES]]
    notes += [f"  NON-FINITE {for_terminal(f['path'])}: {for_terminal(str(f['problem']))}"
              for f in getattr(result, "non_finite", ())[:SHOWN_FAILURES]]
    if result.verified:
        return [f"VERIFIED {bundle}: {result.checked} files match the manifest, "
                f"{len(result.runs)} runs present, {result.reloaded} checkpoints/artifacts "
                "reloaded in a fresh process"] + notes
    failures = result.failures
    out = [f"NOT VERIFIED {bundle}: {len(failures)} failure{'s' if len(failures) != 1 else ''}"]
    out += [f"  FAIL {for_terminal(f['path'])}: {for_terminal(f['problem'])}"
            for f in failures[:SHOWN_FAILURES]]
    if len(failures) > SHOWN_FAILURES:
        out.append(f"  ... and {len(failures) - SHOWN_FAILURES} more failures "
                   f"({len(failures)} in all; `itera-tui verify --json` lists each one)")
    return out + notes
