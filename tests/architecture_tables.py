"""The module tables at the end of ARCHITECTURE.md, made from the code itself.

Each row is a module (or a package, by its `__init__.py`) of the packages whose
insides a maintainer most often looks for, with the first paragraph of its
docstring, which says why it exists. Written by hand the tables went stale (24 of
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


def tables() -> str:
    out = [HEADING, "", "Made from the code by `python tests/architecture_tables.py --write` "
           "(tests/test_architecture.py keeps them equal to it).", ""]
    for package in PACKAGES:
        out += [f"### `tui/{package}/`", "", "| module | what it holds |", "|---|---|"]
        out += [f"| `{name}` | {what} |" for name, what in rows(package)]
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
