"""The code that made the bundle: the campaign folder's git commit, and the modules a
pickled artifact needs to be rebuilt.

A whole pickled module (`torch.save(model, f)`) can only be reloaded where the
class it names can be imported; on another machine, with only the bundle, that
is the copy kept here. `modules_for` maps the classes a pickle needs
(`model.RNNModel`) to the campaign's own files (`model.py`) and the campaign
files those import, read with `ast` (nothing is imported or run).
`git_state` records the commit of the campaign folder and, when it is dirty,
the diff and the untracked files (or says why there is no git record).
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

MAX_MODULES = 200
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


def modules_for(root: Path, class_names: list[str]) -> dict[str, Path]:
    """module -> campaign file, for the modules defining `class_names` and every
    campaign module they import (transitively); modules not in the campaign are left out."""
    todo = [m for name in class_names for m in _with_parents(name.rpartition(".")[0]) if m]
    out: dict[str, Path] = {}
    while todo and len(out) < MAX_MODULES:
        module = todo.pop()
        if module in out:
            continue
        path = module_file(root, module)
        if path is None:
            continue
        out[module] = path
        for name in _imports(path, module):
            todo.extend(m for m in _with_parents(name) if m not in out)
    return out


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                          timeout=GIT_TIMEOUT_S, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise RuntimeError((done.stderr.strip().splitlines() or ["git failed"])[-1][:200])
    return done.stdout


def git_state(root: Path, exclude: list[str]) -> tuple[dict, str | None]:
    """({"commit", "dirty", "untracked", "folder"} or {"commit": None, "reason"}, diff).

    `exclude`: folders of the campaign that are state, not code (`.itera`, outputs)."""
    specs = ["--", ".", *[f":(exclude){e}" for e in exclude]]
    try:
        top = Path(_git(root, "rev-parse", "--show-toplevel").strip())
    except FileNotFoundError:
        return {"commit": None, "reason": "git is not installed on the machine that built "
                                          "the bundle"}, None
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        return {"commit": None, "reason": "the campaign folder is not in a git repository"}, None
    try:
        commit = _git(root, "rev-parse", "HEAD").strip()
    except (RuntimeError, OSError, subprocess.TimeoutExpired):
        return {"commit": None, "reason": "the git repository has no commit yet"}, None
    try:
        diff = _git(root, "diff", "HEAD", "--no-color", "--no-ext-diff", *specs)
        untracked = _git(root, "ls-files", "--others", "--exclude-standard", *specs)
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


def keep_code(root: Path, needs: dict[str, list[str]], stager, exclude: list[str]) -> dict:
    """Copy into `code/` the campaign modules the pickles in `needs` (bundle path ->
    class names) use; return the manifest's `code` section (git state included)."""
    names = sorted({n for group in needs.values() for n in group})
    modules = modules_for(root, names)
    kept = []
    for module, path in sorted(modules.items()):
        rel = f"code/{path.relative_to(root).as_posix()}"
        if stager.copy(path, rel, "code") is not None:
            kept.append(rel)
    git, diff = git_state(root, exclude)
    if diff:
        stager.write_text("code/git.diff", diff, "code")
        git["diff"] = "code/git.diff"
    defined = {n for n in names if n.rpartition(".")[0] in modules}
    return {"git": git, "modules": kept,
            "needs": {rel: group for rel, group in sorted(needs.items()) if group},
            "campaign_classes": sorted(defined),
            "note": "code/ holds the campaign's own Python files that define classes a "
                    "pickled artifact needs (and the campaign files they import); `verify` "
                    "imports them from there to rebuild those classes, nothing else"}
