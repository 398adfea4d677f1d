"""The module tables at the end of ARCHITECTURE.md, made from the code itself.

Each row is a module (or a package, by its `__init__.py`) of the packages whose
insides a maintainer most often looks for, with the first paragraph of its
docstring, which says why it exists; then every kind of ledger event with the
fields its line carries. Written by hand the tables went stale (24 of
76 line counts were wrong, and counts change with every edit, so they are gone);
`python tests/architecture_tables.py --write` writes them anew, and
tests/test_architecture.py fails while a module is missing, gone or says otherwise.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "store", "service")
HEADING = "## Module tables"


def _first_paragraph(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    return " ".join(doc.split("\n\n")[0].split())


def rows(package: str) -> list[tuple[str, str]]:
    root = REPO / "tui"
    found = []
    for path in sorted((root / package).rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        name = rel[:-len("__init__.py")] if path.name == "__init__.py" else rel
        found.append((name, _first_paragraph(path)))
    return sorted(found, key=lambda row: row[0])


def event_rows() -> list[tuple[str, str, str]]:
    """(kind, class, its fields) for every ledger event kind, in the order the module
    declares them; a field its line may leave out ends in `?`."""
    from dataclasses import fields

    from tui.engine.ledger.events import EVENT_TYPES

    found = []
    for kind, cls in EVENT_TYPES.items():
        names = [f.name + ("?" if f.name in cls._OPTIONAL else "") for f in fields(cls)
                 if f.name not in ("seq", "t")]
        found.append((kind, cls.__name__, ", ".join(names) or "(none)"))
    return found


def tables() -> str:
    out = [HEADING, "", "Made from the code by `python tests/architecture_tables.py --write` "
           "(tests/test_architecture.py keeps them equal to it).", ""]
    for package in PACKAGES:
        out += [f"### `tui/{package}/`", "", "| module | what it holds |", "|---|---|"]
        out += [f"| `{name}` | {what} |" for name, what in rows(package)]
        out.append("")
    out += ["### Ledger event kinds (`tui/engine/ledger/events.py`)", "",
            "Every line also carries `seq`, `t`, `event` and `crc`; a field that may be "
            "absent from a line ends in `?`.", "",
            "| `event` | class | fields |", "|---|---|---|"]
    out += [f"| `{kind}` | `{name}` | {what} |" for kind, name, what in event_rows()]
    out.append("")
    return "\n".join(out)


def written(text: str) -> str:
    return text[text.index(HEADING):]


if __name__ == "__main__":
    doc = REPO / "ARCHITECTURE.md"
    text = doc.read_text()
    if "--write" in sys.argv:
        doc.write_text(text[:text.index(HEADING)] + tables())
    else:
        print(tables())
