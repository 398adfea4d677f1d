"""`import tui.integrations` stays light; a missing framework is a clear ImportError."""

import json
import subprocess
import sys

import pytest

from runkit import REPO

HEAVY = ("torch", "transformers", "lightning", "pytorch_lightning", "accelerate")


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


@pytest.mark.slow
def test_importing_the_integrations_loads_no_framework():
    out = run_python("import sys, json, tui.integrations, tui.integrations.hf, "
                     "tui.integrations.lightning, tui.integrations.bridge; "
                     "print(json.dumps(sorted(sys.modules)))")
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout.strip().splitlines()[-1]))
    assert not [m for m in HEAVY if m in loaded]


@pytest.mark.slow
@pytest.mark.parametrize("module, blocked, extra", [
    ("hf", ["transformers"], "itera-tui[hf]"),
    ("lightning", ["lightning", "pytorch_lightning"], "itera-tui[lightning]"),
])
def test_a_missing_framework_is_an_import_error_naming_the_extra(module, blocked, extra):
    block = "; ".join(f"sys.modules[{name!r}] = None" for name in blocked)
    out = run_python(f"import sys; {block}\n"
                     f"try:\n    from tui.integrations.{module} import IteraCallback\n"
                     "except ImportError as error:\n    print('ImportError:', error)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"ImportError: tui.integrations.{module}.IteraCallback needs")
    assert extra in out.stdout


@pytest.mark.slow
def test_unknown_names_are_attribute_errors():
    out = run_python("import tui.integrations.hf as hf; print(hasattr(hf, 'Nope'))")
    assert out.stdout.strip() == "False", out.stderr


def test_resume_from_reads_itera_resume():
    from tui.integrations import resume_from

    assert resume_from({"ITERA_RESUME": " run/checkpoint-8 "}) == "run/checkpoint-8"
    assert resume_from({"ITERA_RESUME": ""}) is None and resume_from({}) is None
