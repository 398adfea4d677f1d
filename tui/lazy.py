"""Package exports loaded on first use (PEP 562), as `textual.widgets` does.

Why: a package `__init__` that imports every module it exports makes each
importer pay for all of them. The control room's first frame needs the plan,
not `check`'s advice or the prices, and no modal screen at all; loading those
only when a name is first asked for keeps them off the first paint.
"""

from __future__ import annotations

import importlib
from typing import Callable


def lazy_exports(package: str, namespace: dict, homes: dict[str, str]) -> Callable[[str], object]:
    """A module `__getattr__` that imports `package.<homes[name]>` for `name`, once."""

    def __getattr__(name: str):
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{home}"), name)
        namespace[name] = value  # later lookups never come back here
        return value

    return __getattr__
