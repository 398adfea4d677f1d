"""What `check` can tell will surely fail, before an hour of GPU is spent.

A plan can be valid TOML, fit its window and still be sure to fail: a typo in
the script name (`python trian.py` exits 2 in every pilot and every run), a
decision metric nothing can produce (every run completes and none is
accepted), a deliverable written outside the run directory where it is looked
up. Each finding is an error when it is certain (exit 2, one message each) and
a warning, naming where it looked, when it is not.

The rules, stated so a user can predict them: the working directory of a run
is the campaign folder, so a `python SCRIPT` (or `torchrun ... SCRIPT`, either
after `env VAR=...`) is looked up there; `python -m MODULE` is looked up in the campaign folder, then
where this interpreter finds it (a warning only: the run's python may differ).
A metric is produced by a `[metrics]` pattern or preset by name, at run time by
a preset's pairs (HF dicts, Lightning bar items) or TensorBoard tags, or by the
SDK and the callbacks from the script's own code: when none of the first can
and no Python file beside the script mentions the name, it is an error. What a
framework logs by itself (`eval_loss` from HF's Trainer, through the callback,
the hf_trainer preset or TensorBoard) counts as reported. Reads
files only; imports nothing. Stdlib only.
"""

from __future__ import annotations

import importlib.machinery
import re
import shutil
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from .collisions import PER_RUN, PYTHONS, written_paths
from .factors import past_env
from .plan import Plan
from .validate import did_you_mean

PYTHON_VALUE_OPTIONS = ("-W", "-X", "-Q")
LAUNCHERS = re.compile(r"(^|/)(torchrun|accelerate|deepspeed)$")
MAX_SOURCES = 200  # Python files read beside one script
MAX_SOURCE_BYTES = 2_000_000


@dataclass(frozen=True)
class Finding:
    """One sure (error) or likely (warning) failure, with the key it is about."""

    key: str
    text: str
    certain: bool

    def line(self) -> str:
        return f"{self.key}: {self.text}"

    def to_dict(self) -> dict:
        return {"key": self.key, "text": self.text,
                "level": "error" if self.certain else "warning"}


@dataclass(frozen=True)
class Entry:
    """What a variant's argv runs: a script file, a module, or a program."""

    kind: str  # script | module | program
    name: str


def entry_of(argv: tuple[str, ...]) -> Entry | None:
    argv = tuple(argv)[past_env(argv):]  # `env TTY_COMPATIBLE=1 python train.py`
    if not argv:
        return None
    program = argv[0]
    if not (PYTHONS.search(program) or LAUNCHERS.search(program)):
        return Entry("program", program)
    i = 1
    while i < len(argv):
        token = argv[i]
        if token == "-m" and i + 1 < len(argv):
            return Entry("module", argv[i + 1])
        if token == "-c":
            return None  # code on the command line: nothing to look up
        if token in PYTHON_VALUE_OPTIONS and PYTHONS.search(program):
            i += 2  # `python -W ignore train.py`
            continue
        if token.startswith("-"):
            i += 1
            if "=" not in token and i < len(argv) and not argv[i].startswith("-") \
                    and LAUNCHERS.search(program) and not argv[i].endswith(".py"):
                i += 1  # a launcher's option value (`--nproc_per_node 2`)
            continue
        if program.endswith("accelerate") and token == "launch":
            i += 1
            continue
        return Entry("script", token)
    return None


def _module_file(name: str, root: Path, search: list[str] | None = None) -> Path | None:
    """The file `python -m name` runs from the campaign folder (or from `search`, this
    interpreter's path), found without importing."""
    parts, paths, spec = name.split("."), list(search or [str(root)]), None
    for depth in range(1, len(parts) + 1):
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[:depth]), paths)
        if spec is None:
            return None
        paths = list(spec.submodule_search_locations or [])
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    origin = Path(spec.origin)
    if spec.submodule_search_locations and (origin.parent / "__main__.py").is_file():
        return origin.parent / "__main__.py"
    return origin


def _module_anywhere(name: str, root: Path) -> Path | None:
    local = _module_file(name, root)
    if local is not None:
        return local
    import sys

    # the module itself, not its top package: the metric check reads the files beside
    # it (`python -m tui.demo.train` from a folder outside the repository, an installed
    # package, must read tui/demo/, not tui/)
    found = _module_file(name, root, [p or "." for p in sys.path])
    if found is not None:
        return found
    top = _top_package_dirs(name.split(".")[0])  # an editable install's own finder
    if top:
        found = _module_file(name.split(".", 1)[1], root, top) if "." in name else None
        return found if found is not None else Path(top[0]) / "__init__.py"
    spec = importlib.machinery.PathFinder.find_spec(name.split(".")[0], sys.path)
    return Path(spec.origin) if spec is not None and spec.origin else None


def _top_package_dirs(top: str) -> list[str]:
    """Where a top-level package lives when no folder of `sys.path` holds it: asked of
    the import system's other finders (`pip install -e .` puts a finder of its own on
    `sys.meta_path`). `find_spec` of a finder imports nothing, so no campaign code runs."""
    import sys

    for finder in sys.meta_path:
        if finder is importlib.machinery.PathFinder or not hasattr(finder, "find_spec"):
            continue
        try:
            spec = finder.find_spec(top, None)
        except (ImportError, ValueError, TypeError, AttributeError):
            continue
        if spec is not None and spec.submodule_search_locations:
            return list(spec.submodule_search_locations)
    return []


def _script_problem(entry: Entry, root: Path) -> tuple[str, bool] | None:
    if any(mark in entry.name for mark in PER_RUN):
        return None
    if entry.kind == "script":
        path = Path(entry.name) if Path(entry.name).is_absolute() else root / entry.name
        if path.is_file():
            return None
        here = sorted(p.name for p in path.parent.glob("*.py")) if path.parent.is_dir() else []
        return (f"python runs {entry.name}, which does not exist in the campaign folder "
                f"(the runs' working directory){did_you_mean(Path(entry.name).name, here)}",
                True)
    if entry.kind == "module":
        if _module_anywhere(entry.name, root) is not None:
            return None
        return (f"python -m {entry.name}: no such module in the campaign folder or where "
                "this interpreter looks (the run's python may have it)", False)
    if "/" in entry.name:
        path = Path(entry.name) if Path(entry.name).is_absolute() else root / entry.name
        return None if path.is_file() else (f"{entry.name} does not exist", True)
    return None if shutil.which(entry.name) else (f"{entry.name} is not on PATH", False)


def _sources(entry: Entry, root: Path) -> list[Path] | None:
    """The Python files beside the script a variant runs (its helpers log too)."""
    if entry.kind == "script":
        path = Path(entry.name) if Path(entry.name).is_absolute() else root / entry.name
    elif entry.kind == "module":
        path = _module_anywhere(entry.name, root)
    else:
        return None
    if path is None or not path.is_file():
        return None
    files = sorted(path.parent.glob("*.py"))[:MAX_SOURCES]
    return [path] + [f for f in files if f != path]


def _source_text(files: list[Path]) -> str:
    """The scripts' code, read once (at most MAX_SOURCE_BYTES in all)."""
    parts, left = [], MAX_SOURCE_BYTES
    for f in files:
        try:
            text = f.read_bytes()[:left].decode("utf-8", "replace")
        except OSError:
            continue
        parts.append(text)
        left -= len(text)
        if left <= 0:
            break
    return "\n".join(parts)


def _mentions(text: str, name: str) -> bool:
    word = re.compile(rf"(?<![\w]){re.escape(name)}(?![\w])")
    bare = name.removeprefix("eval_").removeprefix("val_")  # HF and Lightning prefix them
    loose = re.compile(rf"(?<![\w]){re.escape(bare)}(?![\w])") if bare != name else None
    return bool(word.search(text) or (loose is not None and loose.search(text)))


# What a framework logs by itself, whatever the script names: HF's Trainer (and TRL's
# SFTTrainer, a Trainer) logs these in every log dict, `eval_` ones at each evaluation.
# They reach the engine through the callback, the hf_trainer preset's printed dicts or
# HF's TensorBoard files (`train/loss` -> `loss`, `eval/loss` -> `eval_loss`, see
# tui.engine.reading.tensorboard). Lightning's callback logs what the module's
# `self.log` names (found in the code) and `loss`, which every plan reads anyway.
HF_TRAINER_LOGS = frozenset((
    "loss", "grad_norm", "learning_rate", "epoch", "train_loss", "train_runtime",
    "train_samples_per_second", "train_steps_per_second", "total_flos", "eval_loss",
    "eval_runtime", "eval_samples_per_second", "eval_steps_per_second",
    "mean_token_accuracy", "num_tokens", "entropy", "eval_mean_token_accuracy",
    "eval_num_tokens", "eval_entropy"))
_USES_HF_CALLBACK = re.compile(r"tui\.integrations\.hf\b|tui\.integrations import hf\b")
_USES_TRANSFORMERS = re.compile(r"^\s*(?:from|import)\s+(?:transformers|trl)\b", re.M)


def framework_reports(text: str, spec) -> frozenset[str]:
    """The metric names the frameworks a script's code uses will report through what the
    plan reads: the callbacks always; HF's own log names also through the hf_trainer
    preset's printed dicts or TensorBoard files when the code uses transformers."""
    names: set[str] = set()
    hf_read = spec.preset == "hf_trainer" or bool(spec.tensorboard)
    if _USES_HF_CALLBACK.search(text) or (hf_read and _USES_TRANSFORMERS.search(text)):
        names |= HF_TRAINER_LOGS
    return frozenset(names)


def _metric_finding(plan: Plan, entries: dict[str, Entry | None]) -> Finding | None:
    metric, spec = plan.campaign.metric, plan.metrics
    if metric in spec.names:
        return None
    if spec.preset == "hf_trainer" and metric in HF_TRAINER_LOGS:
        return None  # the plan says the runs are HF Trainers: their dicts carry it
    looked = ["[metrics] patterns" + (f" and preset {spec.preset}" if spec.preset else "")
              + f" ({', '.join(sorted(spec.names)) or 'none'})"]
    runtime = []
    if spec.pairs:
        runtime.append(f"preset {spec.preset}'s name: value pairs")
    if spec.tensorboard:
        runtime.append(f"TensorBoard files ({spec.tensorboard})")
    unread, read = [], []
    for vid, entry in entries.items():
        files = _sources(entry, plan.root) if entry is not None else None
        if files is None:
            unread.append(vid)
            continue
        text = _source_text(files)
        if _mentions(text, metric) or metric in framework_reports(text, spec):
            return None
        beside = len(files) - 1
        read.append(f"{vid}'s {PurePosixPath(entry.name).name}"
                    + (f" and {beside} Python file{'s' if beside > 1 else ''} beside it"
                       if beside else ""))
    if read:
        looked.append("the scripts' code (SDK run.log, HF / Lightning callbacks): "
                      + "; ".join(read))
    certain = not runtime and not unread
    text = (f"no run can report \"{metric}\": looked in {'; '.join(looked)}"
            + (f"; it may still come from {' or '.join(runtime)}" if runtime else "")
            + (f"; the commands of {', '.join(unread)} could not be read" if unread else "")
            + ". Add a [metrics] pattern for it, log it (run.log(step, "
            f"{metric}=...)), or set [campaign] metric to a name the runs report")
    return Finding("campaign.metric", text, certain)


def _deliverable_findings(plan: Plan) -> list[Finding]:
    """A declared deliverable every variant's argv writes outside its run directory,
    and none inside it: it will be missing from every run."""
    out = []
    root = plan.root if plan.root.is_dir() else None
    for name in plan.deliverables.files:
        outside, inside = [], []
        for v in plan.variants:
            argv = " ".join(v.command)
            if any(f"{mark}/{name}" in argv for mark in PER_RUN) or name in (
                    a.rsplit("/", 1)[-1] for a in v.command if any(m in a for m in PER_RUN)):
                inside.append(v.id)
            elif any(PurePosixPath(p).name == PurePosixPath(name).name or p == name
                     for p, _ in written_paths(v.command, root)):
                outside.append(v.id)
        if outside and not inside and len(outside) == len(plan.variants):
            out.append(Finding("deliverables.files", (
                f"{name}: {', '.join(outside)} write{'s' if len(outside) == 1 else ''} it in "
                "the campaign folder, not in the run directory where deliverables are looked "
                f"up: no run can deliver it (write {{run_dir}}/{PurePosixPath(name).name})"),
                True))
    return out


def sure_failures(plan: Plan) -> list[Finding]:
    """Every finding, errors first."""
    out: list[Finding] = []
    entries: dict[str, Entry | None] = {}
    for i, v in enumerate(plan.variants):
        entry = entries[v.id] = entry_of(v.command)
        problem = _script_problem(entry, plan.root) if entry is not None else None
        if problem is not None:
            out.append(Finding(f"variant[{i}].command", f"{v.id}: {problem[0]}", problem[1]))
    for i, s in enumerate(plan.steps):
        entry = entry_of(s.command) if s.command else None
        problem = _script_problem(entry, plan.root) if entry is not None else None
        if problem is not None:
            out.append(Finding(f"step[{i}].command", f"{s.id}: {problem[0]}", problem[1]))
    if not any(f.certain for f in out):  # a missing script says it all
        metric = _metric_finding(plan, entries)
        if metric is not None:
            out.append(metric)
    out += _deliverable_findings(plan)
    return sorted(out, key=lambda f: not f.certain)


def start_refusal(plan: Plan) -> list[str]:
    """The lines `check` exits 2 with, for a campaign about to start: every way of
    starting one (the room, `run`, `engine start`, a far box's `attach --start`)
    refuses on them before anything is frozen or launched, so a plan `check`
    refuses is never started. A campaign that started already (its ledger exists)
    is not asked again: its frozen plan was accepted then, and refusing it now
    would strand the runs it drives."""
    if (plan.state_dir / "ledger.jsonl").exists():
        return []
    return [f.line() for f in sure_failures(plan) if f.certain]


def refuse_sure_failures(plan: Plan) -> None:
    """PlanError (one line each, exit 2 at the command line) when `start_refusal` has
    any: the same words `check` prints."""
    from .validate import PlanError

    lines = start_refusal(plan)
    if lines:
        raise PlanError(lines)
