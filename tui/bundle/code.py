"""The code that made the bundle: the campaign folder's git commit, and the modules a
pickled artifact needs to be rebuilt.

A whole pickled module (`torch.save(model, f)`) can only be reloaded where the
class it names can be imported; on another machine, with only the bundle, that
is the copy kept here. `modules_for` maps the classes a pickle needs
(`model.RNNModel`) to the campaign's own files (`model.py`) and the campaign
files those import, read with `ast` (nothing is imported or run).
The same holds for a model rebuilt from an SDK artifact's `meta`: its
`builder` (`module:function`, or the `reload` hint `module.function(meta)...`)
and its `predict` entry name modules that rebuild the model and redo the
run's predictions with torch alone; those modules (the campaign's, or
itera-tui's own demo, `tui.demo.*`, found beside this package as files) are
kept in `code/` too, so RELOAD.md gives a reader a model, not only tensors.
`git_state` records the commit of the campaign folder and, when it is dirty,
the diff and the untracked files (or says why there is no git record).
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

MAX_MODULES = 200
PACKAGE_ROOT = Path(__file__).resolve().parents[2]  # the folder holding itera-tui's `tui`
OWN_MODULES = ("tui.demo.",)  # of itera-tui's own modules, only the demo's may be kept
ENTRY = re.compile(r"^([A-Za-z_][\w.]*)[:.]([A-Za-z_]\w*)")  # `a.b:fn` or `a.b.fn(...)`
DIFF_LIMIT = 4 << 20
GIT_TIMEOUT_S = 30


def module_file(root: Path, module: str) -> Path | None:
    """`root/a/b.py` or `root/a/b/__init__.py` for module `a.b`, if the campaign has it."""
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    for candidate in (root.joinpath(*parts).with_suffix(".py"),
                      root.joinpath(*parts, "__init__.py")):
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    return None


def _imports(path: Path, module: str) -> set[str]:
    """Module names `path` (module `module`) imports, absolute, with their parents."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=path.name)
    except (OSError, SyntaxError, ValueError, RecursionError):
        return set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".") if package else []
                anchor = anchor[:len(anchor) - (node.level - 1)] if node.level > 1 else anchor
                base = ".".join([*anchor, base] if base else anchor)
            if base:
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def _with_parents(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def _located(root: Path, module: str) -> tuple[Path, Path] | None:
    """(file, the root it is under): the campaign's first, else itera-tui's demo."""
    path = module_file(root, module)
    if path is not None:
        return path, root
    own = module == "tui" or module == "tui.demo" or module.startswith(OWN_MODULES)
    path = module_file(PACKAGE_ROOT, module) if own else None
    return (path, PACKAGE_ROOT) if path is not None else None


def modules_for(root: Path, class_names: list[str],
                modules: list[str] = ()) -> dict[str, tuple[Path, Path]]:
    """module -> (file, root), for the modules defining `class_names`, the `modules`
    named, and every campaign module they import (transitively); modules found
    nowhere (torch, numpy) are left out."""
    todo = [m for name in class_names for m in _with_parents(name.rpartition(".")[0]) if m]
    todo += list(modules)
    out: dict[str, tuple[Path, Path]] = {}
    while todo and len(out) < MAX_MODULES:
        module = todo.pop()
        if module in out:
            continue
        found = _located(root, module)
        if found is None:
            continue
        out[module] = found
        todo.extend(m for m in _with_parents(module) if m not in out)  # its packages
        for name in _imports(found[0], module):
            todo.extend(m for m in _with_parents(name) if m not in out)
    return out


def entry_point(text) -> tuple[str, str] | None:
    """(module, function) of `a.b:fn`, or of a hint `a.b.fn(meta)...`; None otherwise."""
    match = ENTRY.match(text.strip()) if isinstance(text, str) else None
    return (match.group(1), match.group(2)) if match else None


def model_entries(meta: dict) -> dict:
    """{"builder": (module, fn), "predict": (module, fn)} an artifact's meta names."""
    out = {}
    builder = entry_point(meta.get("builder")) or entry_point(meta.get("reload"))
    if builder is not None:
        out["builder"] = builder
    predict = entry_point(meta.get("predict"))
    if predict is not None:
        out["predict"] = predict
    return out


def sdk_artifacts(stager) -> list[str]:
    """Bundle paths of the artifacts the SDK wrote (those with a `.json` sidecar)."""
    return sorted(rel for rel, e in stager.entries.items()
                  if e.kind == "artifact" and rel + ".json" in stager.entries)


def artifact_entries(staging: Path, rels: list[str]) -> dict[str, dict]:
    """bundle path -> its model_entries, for SDK artifacts (their `.json` sidecar's meta)."""
    out = {}
    for rel in rels:
        try:
            meta = json.loads((staging / (rel + ".json")).read_text()).get("meta")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(meta, dict) and (entries := model_entries(meta)):
            out[rel] = entries
    return out


def run_git(root: Path, *args: str) -> str:
    """`git -C root ARGS` on the box (the real one behind the wrap-up's helpers port)."""
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError((done.stderr.strip().splitlines() or ["git failed"])[-1][:200])
    return done.stdout


def git_state(root: Path, exclude: list[str], git=run_git) -> tuple[dict, str | None]:
    """({"commit", "dirty", "untracked", "folder"} or {"commit": None, "reason"}, diff).

    `exclude`: folders of the campaign that are state, not code (`.itera`, outputs);
    `git`: how git is asked (`run_git`, or the wrap-up's helpers port)."""
    specs = ["--", ".", *[f":(exclude){e}" for e in exclude]]
    try:
        top = Path(git(root, "rev-parse", "--show-toplevel").strip())
    except FileNotFoundError:
        return {"commit": None, "reason": "git is not installed on the machine that built "
                                          "the bundle"}, None
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        return {"commit": None, "reason": "the campaign folder is not in a git repository"}, None
    try:
        commit = git(root, "rev-parse", "HEAD").strip()
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        return {"commit": None, "reason": "the git repository has no commit yet"}, None
    try:
        diff = git(root, "diff", "HEAD", "--no-color", "--no-ext-diff", *specs)
        untracked = git(root, "ls-files", "--others", "--exclude-standard", *specs)
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as error:
        return {"commit": commit, "dirty": None, "reason": f"git diff failed: {error}"}, None
    try:
        folder = root.resolve().relative_to(top.resolve()).as_posix()
    except ValueError:
        folder = "."
    names = sorted(line for line in untracked.splitlines() if line)
    state = {"commit": commit, "dirty": bool(diff or names), "folder": folder,
             "untracked": names[:100]}
    if len(names) > 100:
        state["untracked_more"] = len(names) - 100
    if len(diff.encode()) > DIFF_LIMIT:
        state["diff_note"] = f"diff of {len(diff.encode())} bytes not kept (over {DIFF_LIMIT})"
        diff = ""
    return state, diff or None


def keep_code(root: Path, needs: dict[str, list[str]], stager, exclude: list[str],
              entries: dict[str, dict] | None = None, git=run_git) -> dict:
    """Copy into `code/` the campaign modules the pickles in `needs` (bundle path ->
    class names) use, and those the artifacts' `entries` (bundle path -> builder /
    predict) name; return the manifest's `code` section (git state included)."""
    entries = entries or {}
    names = sorted({n for group in needs.values() for n in group})
    named = sorted({module for e in entries.values() for module, _ in e.values()})
    modules = modules_for(root, names, named)
    kept = []
    for module, (path, base) in sorted(modules.items()):
        rel = f"code/{path.relative_to(base).as_posix()}"
        if rel not in kept and stager.copy(path, rel, "code") is not None:
            kept.append(rel)
    state, diff = git_state(root, exclude, git)
    if diff:
        stager.write_text("code/git.diff", diff, "code")
        state["diff"] = "code/git.diff"
    defined = {n for n in names if n.rpartition(".")[0] in modules}
    rebuilds = {rel: {role: f"{module}:{fn}" for role, (module, fn) in e.items()
                      if module in modules}
                for rel, e in sorted(entries.items())}
    return {"git": state, "modules": kept,
            "needs": {rel: group for rel, group in sorted(needs.items()) if group},
            "rebuild": {rel: e for rel, e in rebuilds.items() if e},
            "campaign_classes": sorted(defined),
            "note": "code/ holds the campaign's own Python files that define classes a "
                    "pickled artifact needs, the modules an artifact's meta names to rebuild "
                    "its model and redo its predictions (`rebuild`), and the files those "
                    "import; `verify` imports from there only the classes pickles need"}
