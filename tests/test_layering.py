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


@pytest.mark.parametrize("package", ["tui.campaign", "tui.engine", "tui.bundle"])
def test_core_imports_no_heavy_modules(package):
    loaded = modules_after_import(f"import {package}")
    assert not [m for m in HEAVY if m in loaded], package


def test_cli_check_path_imports_no_heavy_modules():
    loaded = modules_after_import("import tui.cli, tui.campaign.summary")
    assert "torch" not in loaded and "textual" not in loaded
