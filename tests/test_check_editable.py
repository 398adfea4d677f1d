"""`check` finds `python -m tui.demo.train` where `pip install -e .` puts it.

The README's set-up is an editable install; setuptools serves such a package
through a finder of its own on `sys.meta_path`, not a folder of `sys.path`. A
campaign made by `itera-tui init --demo` outside the repository names
`python -m tui.demo.train`, and `check` there printed six false warnings ("no
such module ... where this interpreter looks", "no run can report val_acc")
because it asked only the path finder."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

from conftest import REPO
from tui.campaign.preflight import _module_anywhere


class EditableFinder:
    """What setuptools' `__editable___*_finder` does: a top package mapped to a folder."""

    def __init__(self, mapping: dict[str, Path]):
        self.mapping = mapping

    def find_spec(self, name, path=None, target=None):
        if name not in self.mapping:
            return None
        folder = self.mapping[name]
        return importlib.util.spec_from_file_location(
            name, folder / "__init__.py", submodule_search_locations=[str(folder)])


def test_a_module_of_an_editable_install_is_found_without_importing_it(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "path", [p for p in sys.path
                                      if Path(p or ".").resolve() != REPO.resolve()])
    monkeypatch.chdir(tmp_path)  # the folder `init --demo` wrote: no tui/ here
    plain = [f for f in sys.meta_path if f in (importlib.machinery.BuiltinImporter,
                                               importlib.machinery.FrozenImporter,
                                               importlib.machinery.PathFinder)]
    monkeypatch.setattr(sys, "meta_path", plain)  # as if tui were installed nowhere
    assert _module_anywhere("tui.demo.train", tmp_path) is None
    monkeypatch.setattr(sys, "meta_path", [*plain, EditableFinder({"tui": REPO / "tui"})])
    assert _module_anywhere("tui.demo.train", tmp_path) == REPO / "tui" / "demo" / "train.py"
    # as for a package found on sys.path: a module it lacks points at the package itself
    assert _module_anywhere("tui.demo.nothing_here", tmp_path) == REPO / "tui" / "__init__.py"
