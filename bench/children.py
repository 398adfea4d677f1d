"""The environment a bench gives the processes it starts (engines, CLIs, runs).

One home for it so every bench measures its children as a user's shell starts
them: this repository first on PYTHONPATH, and bytecode caching on. The
sandbox these benches run in sets PYTHONDONTWRITEBYTECODE=1, which would make
every child compile each module it imports from source, a cost no user pays
after their first start.
"""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child_env(**extra: str) -> dict[str, str]:
    """os.environ with ROOT first on PYTHONPATH and PYTHONDONTWRITEBYTECODE unset, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env
