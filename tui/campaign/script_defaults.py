"""Output paths a script writes by default: its argparse defaults, read without running it.

pytorch/examples' word_language_model declares `--save` with `default='model.pt'`;
a plan that does not pass `--save` makes every run (each pilot and each full
run of every variant) write the same `./model.pt` in the campaign folder, the
runs' working directory: each overwrites the last, and none is in its run
directory where deliverables and the bundle look. The command line does not
show it, so `collisions` reads the script's own defaults here.

The script is parsed with `ast` (never imported, never run): every
`add_argument("-s", "--save", ..., default="model.pt")` call whose default is
a string literal. An option counts as an output by its name, the same rule as
for the command line (`collisions._purpose`: `--save`, `--out`, `--log-dir`...);
a default computed at run time (`os.path.join(os.environ["ITERA_RUN_DIR"], ...)`)
cannot be read and is left alone. Stdlib only.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

MAX_SCRIPT_BYTES = 2_000_000


@dataclass(frozen=True)
class Default:
    """One argparse option with a literal string default, where the script declares it."""

    options: tuple[str, ...]  # its option strings: ("-s", "--save")
    value: str
    line: int

    @property
    def option(self) -> str:
        """The long spelling when there is one: what a person passes."""
        return next((o for o in self.options if o.startswith("--")), self.options[0])


def argparse_defaults(script: Path) -> tuple[Default, ...]:
    """The options of `script` declared with a literal string default; () when the file
    cannot be read or parsed (a warning source, never an error)."""
    try:
        source = script.read_bytes()[:MAX_SCRIPT_BYTES]
        tree = ast.parse(source, filename=script.name)
    except (OSError, SyntaxError, ValueError, RecursionError, MemoryError):
        return ()
    out = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        options = tuple(a.value for a in node.args if isinstance(a, ast.Constant)
                        and isinstance(a.value, str) and a.value.startswith("-"))
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        if options and isinstance(default, ast.Constant) and isinstance(default.value, str):
            out.append(Default(options, default.value, node.lineno))
    return tuple(out)


def given(argv: tuple[str, ...], default: Default) -> bool:
    """Whether the command passes the option itself (`--save X` or `--save=X`)."""
    return any(token.split("=", 1)[0] in default.options for token in argv)
