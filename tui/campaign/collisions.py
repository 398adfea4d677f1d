"""Files that two variants' commands would write to the same place.

A run's working directory is the campaign folder, not its run directory: a
command such as pytorch/examples' `--save model.pt` makes every run write the
same `./model.pt` (each overwrites the last, and deliverables, looked up in the
run directory, are missing). `{run_dir}/model.pt` gives each run its own file
(the engine expands `{run_dir}`, `{run_id}` and `{max_steps}` in argv, never
through a shell). `check` warns, before anything runs, when a path-like
argument that is not under `{run_dir}` (or `{run_id}`) appears in two
variants' commands, or when a file the plan expects as a deliverable is
written outside the run directory.

The check reads argv only, so it tells a written path from a read one by
rules, said here so a user can predict it: the program and script (the
interpreter, the first positional after it, a `-m` module), source files
(`.py`, `.sh`), corpus files, the values of options whose name says input
(`--data`, `--config`, `--resume`, ...) and positionals or unnamed-purpose
options naming a file that exists already are read; the values of options
whose name says output (`--save`, `--out`, `--checkpoint`, `--log-dir`, ...)
are written, existing or not. The scripts' own argparse defaults for output
options the command does not pass are read too, statically (`script_defaults`).
A warning, never an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .factors import script_argv
from .plan import Plan
from .script_defaults import argparse_defaults, given

PER_RUN = ("{run_dir}", "{run_id}")
PYTHONS = re.compile(r"(^|/)python[0-9.]*$")
SOURCE_SUFFIXES = (".py", ".sh", ".ipynb", ".toml")
EXTENSION = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,7}$")
INPUT_WORDS = {"data", "input", "in", "corpus", "train", "valid", "val", "test", "dataset",
               "config", "cfg", "load", "resume", "from", "init", "vocab", "tokenizer",
               "pretrained", "base", "source", "src", "read", "m"}
OUTPUT_WORDS = {"save", "out", "output", "outdir", "dump", "export", "write", "dest", "ckpt",
                "checkpoint", "checkpoints", "log", "logs", "logdir", "result", "results",
                "pred", "preds", "predictions", "report", "artifact", "artifacts"}


@dataclass(frozen=True)
class SharedPath:
    path: str  # as written in the commands
    variants: tuple[str, ...]
    option: str | None  # the option that names it ("--save"), None for a positional
    text: str

    def to_dict(self) -> dict:
        return {"path": self.path, "variants": list(self.variants), "option": self.option,
                "text": self.text}


def path_like(value: str) -> bool:
    if not value or "://" in value or value.startswith("-"):
        return False
    return "/" in value or bool(EXTENSION.search(value))


def _purpose(option: str | None) -> str:
    """"input" | "output" | "" from an option's name (`--save-dir` -> output)."""
    if option is None:
        return ""
    words = set(re.split(r"[-_]+", option.lstrip("-").lower()))
    if words & INPUT_WORDS:
        return "input"
    return "output" if words & OUTPUT_WORDS else ""


def written_paths(argv: tuple[str, ...], root: Path | None = None,
                  corpus: frozenset[str] = frozenset()) -> list[tuple[str, str | None]]:
    """(path, option) for each argument of `argv` that the run may write outside its
    run directory (see the module docstring for the rules)."""
    out: list[tuple[str, str | None]] = []
    program = 1 if argv and PYTHONS.search(argv[0]) else 0  # the script after python
    positional, i = 0, 1
    while i < len(argv):
        token, option, value = argv[i], None, argv[i]
        if token.startswith("--") and "=" in token:
            option, value = token.split("=", 1)
        elif token.startswith("-") and len(token) > 1:
            if i + 1 < len(argv) and not argv[i + 1].startswith("-"):
                option, value = token, argv[i + 1]
                i += 1
                if option == "-m" and positional == 0:
                    program = 0  # `python -m module`: the module is the program
            else:
                i += 1
                continue
        else:
            positional += 1
            value = token.split("=", 1)[0] if "=" in token else token
            if positional == program:
                i += 1
                continue
        i += 1
        if not path_like(value) or any(mark in value for mark in PER_RUN):
            continue
        purpose = _purpose(option)
        if purpose == "input" or value.endswith(SOURCE_SUFFIXES) or _in_corpus(value, corpus):
            continue
        if purpose != "output" and root is not None and (root / value).exists():
            continue
        out.append((value, option))
    return out


def _in_corpus(value: str, corpus: frozenset[str]) -> bool:
    norm = PurePosixPath(value).as_posix()
    return any(norm == c or norm.startswith(c.rstrip("/") + "/") for c in corpus)


def _corpus_paths(plan: Plan) -> frozenset[str]:
    if plan.corpus is None:
        return frozenset()
    base = PurePosixPath(plan.corpus.root)
    paths = {(base / rel).as_posix() for rel, _ in plan.corpus.files}
    if base.as_posix() != ".":
        paths.add(base.as_posix())
    return frozenset(paths)


def default_written_paths(plan: Plan, root: Path) -> list[SharedPath]:
    """Output paths the variants' scripts write by default (their argparse defaults,
    read statically: `script_defaults`) when the command does not pass the option:
    every run of every such variant writes that one file in the campaign folder."""
    users: dict[tuple[str, str, str, int], list[str]] = {}
    parsed: dict[Path, tuple] = {}
    for v in plan.variants:
        argv = script_argv(v.command)
        if not argv or not argv[0].endswith(".py") or any(m in argv[0] for m in PER_RUN):
            continue
        script = Path(argv[0]) if Path(argv[0]).is_absolute() else root / argv[0]
        if script not in parsed:
            parsed[script] = argparse_defaults(script) if script.is_file() else ()
        for d in parsed[script]:
            if _purpose(d.option) != "output" or not path_like(d.value) \
                    or any(m in d.value for m in PER_RUN) or given(argv[1:], d):
                continue
            key = (argv[0], d.option, d.value, d.line)
            if v.id not in users.setdefault(key, []):
                users[key].append(v.id)
    out = []
    for (script, option, value, line), ids in users.items():
        name = PurePosixPath(value).name
        out.append(SharedPath(value, tuple(ids), option, (
            f"{', '.join(ids)} run{'s' if len(ids) == 1 else ''} {script} without {option}: "
            f"its default ({option} {value}, {PurePosixPath(script).name} line {line}) "
            f"makes every run write the same {value} in the campaign folder (the working "
            "directory), each run overwriting the last and none in its run directory; pass "
            f"{option} {{run_dir}}/{name} in the command")))
    return out


def shared_output_paths(plan: Plan, root: Path | None = None) -> list[SharedPath]:
    """Warnings for paths two variants would both write (outside their run directories),
    for deliverables written outside the run directory, and for output paths the
    scripts write by default (`default_written_paths`). `root`: the campaign folder,
    to tell an existing input file from an output and to read the scripts (None: no
    file system look-up)."""
    corpus = _corpus_paths(plan)
    seen: dict[str, list[tuple[str, str | None]]] = {}
    for v in plan.variants:
        for path, option in written_paths(v.command, root, corpus):
            if v.id not in [vid for vid, _ in seen.get(path, [])]:
                seen.setdefault(path, []).append((v.id, option))
    out = default_written_paths(plan, root) if root is not None else []
    deliverables = set(plan.deliverables.files)
    for path, users in seen.items():
        ids = tuple(vid for vid, _ in users)
        option = users[0][1]
        where = f"{option} {path}" if option else path
        if len(ids) > 1:
            out.append(SharedPath(path, ids, option, (
                f"{', '.join(ids)} all write {where} outside their run directories (the "
                "working directory is the campaign folder): each run overwrites the last; "
                f"write {{run_dir}}/{PurePosixPath(path).name} instead")))
        elif PurePosixPath(path).name in deliverables or path in deliverables:
            out.append(SharedPath(path, ids, option, (
                f"{ids[0]} writes the deliverable {where} outside its run directory, where "
                f"deliverables are looked up: write {{run_dir}}/{PurePosixPath(path).name}")))
    return out
