"""The core stays pure: importing it loads no textual, torch or pynvml."""

import json
import subprocess
import sys

import pytest

from conftest import REPO

HEAVY = ("torch", "textual", "pynvml")


def modules_after_import(code: str) -> set[str]:
    probe = code + "\nimport sys, json; print(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True,
                         text=True, check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


@pytest.mark.slow
@pytest.mark.parametrize("package", ["tui.campaign", "tui.engine", "tui.bundle"])
def test_core_imports_no_heavy_modules(package):
    loaded = modules_after_import(f"import {package}")
    assert not [m for m in HEAVY if m in loaded], package


@pytest.mark.slow
def test_cli_check_path_imports_no_heavy_modules():
    loaded = modules_after_import("import tui.cli, tui.campaign.summary")
    assert "torch" not in loaded and "textual" not in loaded


# -- the layer table, checked by import-linter (contracts in pyproject.toml) -----------

def lint_imports(root) -> subprocess.CompletedProcess:
    import os

    env = dict(os.environ, PYTHONPATH=str(root))
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports())"
    return subprocess.run([sys.executable, "-c", code], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_import_linter_contracts_are_kept():
    proc = lint_imports(REPO)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "0 broken" in proc.stdout


@pytest.mark.slow
@pytest.mark.parametrize("module, backwards", [
    ("tui/engine/reading/feeds.py", "from ...session import CampaignSession"),
    ("tui/campaign/plan.py", "from ..engine import ledger"),
    ("tui/bundle/report.py", "import textual"),
    ("tui/app/room.py", "from ..engine.runs import processes"),
])
def test_import_linter_fails_on_a_backwards_import(tmp_path, module, backwards):
    import shutil

    shutil.copytree(REPO / "tui", tmp_path / "tui",
                    ignore=shutil.ignore_patterns("__pycache__", "data"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{backwards}  # noqa\n")
    proc = lint_imports(tmp_path)
    assert proc.returncode != 0 and "BROKEN" in proc.stdout.upper(), proc.stdout[-2000:]


def test_nothing_outside_the_engine_names_an_engine_private_attribute():
    import re

    offenders = []
    for path in sorted((REPO / "tui").rglob("*.py")):
        if path.is_relative_to(REPO / "tui" / "engine"):
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if re.search(r"engine\._[a-z]", line):
                offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_no_module_of_tui_imports_itself_back_through_others():
    """No import cycle anywhere in the package (function-level imports included): a
    cycle is two ideas that cannot be read apart, and the order they load in decides
    whether a name exists yet."""
    import grimp

    graph = grimp.build_graph("tui")
    edges = {m: {x for x in graph.find_modules_directly_imported_by(m) if x.startswith("tui")}
             for m in graph.modules}
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components, iteratively deep enough here
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for module in sorted(edges):
        if module not in index:
            visit(module)
    assert cycles == []


# -- what the room loads before its first paint -----------------------------------------

def _module_file(module: str):
    base = REPO / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imported_at_load(module: str) -> set[str]:
    """The modules that importing `module` runs the import statements of, read from the
    source: module level and class bodies, not function bodies (imported on first use)
    nor `if TYPE_CHECKING:` blocks."""
    import ast

    path = _module_file(module)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    def absolute(node) -> str:
        if not node.level:
            return node.module
        base = package.split(".")[:len(package.split(".")) - (node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def walk(body) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                home = absolute(node)
                found.add(home)
                found.update(f"{home}.{alias.name}" for alias in node.names
                             if _module_file(f"{home}.{alias.name}") is not None)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            elif isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                walk(node.orelse)
            else:
                for name in ("body", "orelse", "finalbody", "handlers"):
                    walk(getattr(node, name, []) or [])

    walk(ast.parse(path.read_text()).body)
    return found


def loaded_by(roots) -> set[str]:
    """Every module importing `roots` loads (their packages' `__init__` included)."""
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        module = todo.pop()
        parts = module.split(".")
        for n in range(1, len(parts) + 1):
            name = ".".join(parts[:n])
            if name in seen:
                continue
            seen.add(name)
            if name.startswith("tui") and _module_file(name) is not None:
                todo.extend(_imported_at_load(name))
    return seen


# what `itera-tui PATH` imports until its first frame (tui.app.main's functions import
# these), and the modules of the records the engine's snapshot holds (the codec imports
# a record's module to decode it)
FIRST_PAINT = ("tui.app.main", "tui.app.app", "tui.session.loading", "tui.service.starter",
               "tui.service.client", "tui.service.fleet", "tui.service.codec",
               "tui.session.snapshot", "tui.probes.gpu_snapshot", "tui.probes.host",
               "tui.engine.conclusion.outcome")


def test_the_rooms_first_paint_loads_no_sampler_no_feed_reader_and_no_engine():
    """The room draws the engine's snapshot: decoding a GPU or host sample needs neither
    psutil nor the NVML sampler, and judging runs from the snapshot no metrics reader;
    each was once a fifth of the room's extra start-up time (bench/room_idle_bench.py)."""
    loaded = loaded_by(FIRST_PAINT)
    assert "textual" in loaded and "tui.engine.ledger.events" in loaded  # it sees imports
    unwanted = ("psutil", "pynvml", "torch", "tui.probes.gpu", "tui.engine.reading.feeds",
                "tui.engine.engine", "tui.service.remote")
    assert [m for m in unwanted if m in loaded] == []


def test_the_ending_a_finished_campaign_opens_on_loads_no_run_screen():
    """A finished campaign's room opens on its ending at the first frame: the ending draws
    its facts as the run screen does (`screens.facts`) without loading that screen, its
    run detail model or its tail reader (bench/room_idle_bench.py paints that ending)."""
    loaded = loaded_by(("tui.app.screens.done",))
    assert "tui.app.screens.facts" in loaded and "tui.app.ending_view" in loaded
    assert [m for m in ("tui.app.screens.run", "tui.app.run_detail", "tui.app.tails")
            if m in loaded] == []
