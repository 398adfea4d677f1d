"""Which itera-tui this is: its version and a digest of its own source.

Two boxes of one campaign must run the same itera-tui, or their rules, ledgers
and bundles may not mean the same thing. The version alone says too little (an
edited checkout keeps its version), so the digest covers every file of the `tui`
package. `python3 -m tui.remote.fingerprint` prints both: the far side of
`check --hosts` runs it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent  # the tui package directory
SOURCE_SUFFIXES = (".py", ".tcss")


def source_digest(package: Path = PACKAGE) -> str:
    """sha256 over each source file's path (from the package) and content, in order."""
    h = hashlib.sha256()
    for path in sorted(p for p in package.rglob("*") if p.suffix in SOURCE_SUFFIXES
                       and "__pycache__" not in p.parts and p.is_file()):
        rel = path.relative_to(package).as_posix().encode()
        h.update(len(rel).to_bytes(4, "big") + rel)
        data = path.read_bytes()
        h.update(len(data).to_bytes(8, "big") + data)
    return h.hexdigest()


def version() -> str:
    from .. import __version__

    return __version__


if __name__ == "__main__":
    print(f"itera_version={version()}")
    print(f"itera_digest={source_digest()}")
