"""The wrap-up's one door to the processes it starts (its helpers' port).

Building a bundle starts three processes of its own, beside the runs: `git`, for
the snapshot of the campaign folder's code (`code.git_state`); the figure drawer,
matplotlib in a fresh isolated interpreter (`plots.draw`); and the reload
verifier, the one process that imports torch (`reload_check.Reloader`). They are
started through one `WrapupHelpers`, as the engine starts its runs through one
`Processes` (tui/engine/runs/port.py), so a stand-in can take the box's place:
tests hand the wrap-up one that answers in the test's own process (a snapshot
from the files, placeholder figures, verdicts for known fake checkpoints) and
records what was asked (tests/fakewrapup.py), and a campaign's decisions,
report and ledger are tested with no process started.

`HostHelpers` is the real one, and the default wherever none is given: the
bundle a wrap-up builds is the same with it as without the port.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from . import plots
from .code import run_git
from .plots import Drawing, Panel
from .reload_check import Reloader


class WrapupHelpers(Protocol):
    """What the wrap-up may start, and all it may start."""

    def git(self, root: Path, *args: str) -> str:
        """`git -C root ARGS`'s output; RuntimeError with git's last words when it fails,
        FileNotFoundError when there is no git."""

    def draw(self, panels: tuple[Panel, ...], out_dir: Path) -> Drawing:
        """The figures of `panels` drawn into `out_dir`, or why not."""

    def reloader(self) -> Reloader:
        """The bundle's verifier (started on its first request; the caller closes it)."""


class HostHelpers:
    """The box's own: git, the isolated drawer, the torch verifier process."""

    def git(self, root: Path, *args: str) -> str:
        return run_git(root, *args)

    def draw(self, panels: tuple[Panel, ...], out_dir: Path) -> Drawing:
        return plots.draw(panels, out_dir)

    def reloader(self) -> Reloader:
        return Reloader()
