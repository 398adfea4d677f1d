"""The one way a test builds a Python environment of its own.

`python -m venv --system-site-packages` exposes the *base* interpreter's
site-packages, not those of the interpreter running the tests: when the tests run
inside a venv (the README's set-up), torch, psutil, transformers and peft live in
that venv, and a "system" venv made from it sees none of them (a far engine died
with `No module named 'psutil'` that way, passing only in CI, which has no venv).
So an environment that must see this interpreter's libraries gets a `.pth` file
naming its library folders. A `.pth` lists paths only: the folders' own `.pth`
hooks (the editable install of tui) are not run there, so this repo is importable
in the new venv only when asked for (`sees_repo`).
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def make_venv(path: Path, *, sees_these_libraries: bool = False, sees_repo: bool = False,
              with_pip: bool = False) -> Path:
    """A new venv at `path`; returns its `python`.

    `sees_these_libraries`: it imports what the interpreter running the tests has
    installed (torch, psutil, ...); `sees_repo`: it imports this checkout's `tui`;
    `with_pip`: it has its own pip (slower to make)."""
    path = Path(path)
    args = [] if with_pip else ["--without-pip"]
    subprocess.run([sys.executable, "-m", "venv", *args, str(path)], check=True,
                   timeout=300 if with_pip else 120)
    python = path / "bin" / "python"
    folders = []
    if sees_repo:
        folders.append(str(REPO))
    if sees_these_libraries:
        folders += sorted({sysconfig.get_paths()[key] for key in ("purelib", "platlib")})
    if folders:
        theirs = subprocess.run([str(python), "-c",
                                 "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                capture_output=True, text=True, check=True, timeout=60)
        Path(theirs.stdout.strip(), "itera-test-libraries.pth").write_text(
            "".join(f"{folder}\n" for folder in folders))
    return python
