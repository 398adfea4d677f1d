"""Why a run failed, in one line, from the end of its stderr.

The last line of a crashed run's stderr is seldom its cause: torchrun ends its
`ChildFailedError` report with a rule of `=` signs, a Rich traceback with a box
edge, a launcher with a blank line, so a reason made of "the last line" reads
`failed (exit 1): ======…`. The cause is the last line that names an exception
(`RuntimeError: CUDA out of memory`, `[rank0]: ValueError: …`, `KeyboardInterrupt`);
torchrun's own `ChildFailedError` wraps the child's exception, so it is the cause
only when the child's line is not in the tail, and then with its root-cause fields
(`exitcode`, `error_file`). Lines drawn only of punctuation or box characters and
blank lines are never a reason; with no exception line, the last other line is.
Read from the file's end only, with control characters dropped: text a run controls
is never printed raw.
"""

from __future__ import annotations

import re
from pathlib import Path

TAIL_BYTES = 32 * 1024  # a torchrun report with a few ranks' tracebacks fits
LINE_CHARS = 200

# `pkg.mod.NameError: text`, `Exception`, `KeyboardInterrupt`, after an optional rank
# prefix as torchrun's `--tee`/`[rank0]:` writes it
EXCEPTION = re.compile(r"^(?:\[(?:rank|default)?\d*\]:\s*)?(?:[A-Za-z_]\w*\.)*"
                       r"(?P<name>[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Failure))"
                       r"(?::.*)?$")
WRAPPERS = ("ChildFailedError",)  # a launcher's exception around its child's own
# the root-cause fields of torchrun's ChildFailedError block worth a reason
ROOT_FIELDS = re.compile(r"^(?P<key>exitcode|error_file|exception)\s*:\s*(?P<value>.+)$")


def tail_lines(run_dir: Path, name: str = "stderr.log", opener=None) -> list[str]:
    """The non-empty lines of the end of a run's stream (`name`: stderr.log, stdout.log),
    printable characters only. `opener(path)`: a binary file (the engine passes one that
    opens regular files only: `reading.regular_files`); an OSError reads as nothing."""
    try:
        with (opener or (lambda p: open(p, "rb")))(run_dir / name) as f:
            f.seek(0, 2)
            size = f.tell()
            f.seek(max(0, size - TAIL_BYTES))
            data = f.read(TAIL_BYTES)
    except OSError:
        return []
    text = data.decode("utf-8", "replace").replace("\r", "\n")
    lines = ["".join(ch for ch in line if ch.isprintable()).strip()[:LINE_CHARS]
             for line in text.split("\n")]
    return [line for line in lines if line]


def is_decoration(line: str) -> bool:
    """A rule, a box edge, a row of dots: no letter and no digit."""
    return not any(ch.isalnum() for ch in line)


def last_error_lines(run_dir: Path, n: int = 2) -> list[str]:
    """The last `n` lines of a run's stderr that say something (decoration skipped)."""
    return [line for line in tail_lines(run_dir) if not is_decoration(line)][-n:]


def failure_cause(run_dir: Path) -> str | None:
    """The line of a failed run's stderr that says why (see the module's docstring)."""
    lines = [line for line in tail_lines(run_dir) if not is_decoration(line)]
    found = [(line, m.group("name")) for line in lines if (m := EXCEPTION.match(line))]
    own = [line for line, name in found if name not in WRAPPERS]
    if own:
        return own[-1]
    if found:
        fields = [f"{m.group('key')} {m.group('value')}" for line in lines
                  if (m := ROOT_FIELDS.match(line)) and m.group("value") != "<N/A>"]
        return found[-1][0] + (f" ({'; '.join(fields)})" if fields else "")
    return lines[-1] if lines else None
