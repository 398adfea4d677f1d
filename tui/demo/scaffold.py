"""`itera-tui init [--demo] [DIR]`: a campaign folder to start from, out of the package.

Why it exists: installed from a wheel, itera-tui has no campaign.toml anywhere near
the person (the repository's demo plan sits at the repository's root), so every
command answered "campaign.toml: no such file". The package carries two starting
folders as package data, and this writes one into DIR:

- the template (`tui/demo/template/`): a commented campaign.toml and a tiny
  training script that runs as it stands, to be edited into one's own campaign;
- the demo (`--demo`): the embedded demo campaign (`tui/demo/campaign.toml`) with
  its pinned corpus copied beside it as `data/`, so it runs from any folder.

Nothing is overwritten: a file already in DIR stops the command before anything is
written. Stdlib only: it must not load torch or textual.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

CAMPAIGN = "campaign.toml"


class ScaffoldError(ValueError):
    """A folder `init` cannot write into (files already there, not a folder)."""


@dataclass(frozen=True)
class Written:
    """What `init` wrote: the folder and the files, relative to it, in order."""

    folder: Path
    files: tuple[str, ...]
    demo: bool


def _sources(demo: bool) -> list[tuple[str, bytes]]:
    """(relative destination, bytes) of every file the chosen starting folder holds."""
    package = resources.files("tui.demo")
    if demo:
        out = [(CAMPAIGN, package.joinpath(CAMPAIGN).read_bytes())]
        data = package.joinpath("data")
        for entry in sorted(data.iterdir(), key=lambda e: e.name):
            if entry.is_file() and entry.name.endswith(".jsonl"):
                out.append((f"data/{entry.name}", entry.read_bytes()))
        return out
    template = package.joinpath("template")
    return [(name, template.joinpath(name).read_bytes()) for name in (CAMPAIGN, "train.py")]


def write(folder: str | Path, *, demo: bool = False) -> Written:
    """Write the template (or the demo) into `folder`, created if missing; never overwrite."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ScaffoldError(f"{folder}: not a folder")
    sources = _sources(demo)
    there = [rel for rel, _ in sources if (folder / rel).exists()]
    if there:
        raise ScaffoldError(
            f"{folder / there[0]} already exists; init writes into a folder without "
            f"{', '.join(there)} (nothing was written)")
    for rel, data in sources:
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return Written(folder, tuple(rel for rel, _ in sources), demo)
