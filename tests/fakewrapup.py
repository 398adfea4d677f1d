"""A stand-in for the wrap-up's helper processes, behind its port (tui/bundle/helpers.py):
a campaign's wrap-up, report and ledger tested with no process started.

`FakeWrapup` starts nothing and records each thing asked of it (`asked`):

- git: a campaign folder in no git repository gets what git says there (git_state
  records "not in a git repository", as on the box); a folder inside one is refused
  (AssertionError): the snapshot of a real repository is the real git's to test.
- the drawer: each figure of the spec as a placeholder PNG and SVG, and a
  `figures.json` made from the spec itself (titles, labels, limits, series), not
  by matplotlib; `FakeWrapup(draw_problem=...)` is a drawer that failed (the
  wrap-up goes on with "no figures", as it does when matplotlib fails).
- the verifier: a known fake checkpoint (`write_fake_checkpoint`, a file that holds
  the verdict it is to get) is judged from its own bytes, no torch imported; any
  other file is refused (AssertionError): reloading real weights is the real
  verifier's to test.

    helpers = FakeWrapup()
    build_bundle(plan, helpers=helpers)          # or CampaignSession(..., wrapup_helpers=)
    fake_host(monkeypatch, wrapup=helpers)       # every wrap-up of an in-process CLI
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from tui.bundle.plots import FIGURES, Drawing
from tui.bundle.reload_check import Reloader
from tui.engine.checkpoints.file_verdict import FileVerdict
from tui.plotting.draw import series_record

FAKE_CHECKPOINT = b"ITERA-FAKE-CHECKPOINT\n"  # then the verdict's fields, as JSON
PLACEHOLDER_PNG = b"\x89PNG\r\n\x1a\n placeholder: drawn by tests/fakewrapup.py\n"
PLACEHOLDER_SVG = ('<svg xmlns="http://www.w3.org/2000/svg"><title>placeholder: drawn '
                   'by tests/fakewrapup.py</title></svg>\n')


def write_fake_checkpoint(path: Path, **verdict) -> Path:
    """A file the fake verifier judges from its bytes: `verdict` is what it answers
    (`ok=True, step=3, format="itera"` ...; ok defaults to True)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(FAKE_CHECKPOINT + json.dumps({"ok": True} | verdict).encode())
    return path


class FakeVerifier:
    """What `Reloader` asks of its `VerifierClient`, answered at once, in-process."""

    def __init__(self, asked: list):
        self.asked = asked
        self._next = 0
        self._answers: dict[int, FileVerdict] = {}
        self.closed = False

    def start(self) -> None:
        pass

    def submit(self, path, *, code_dir=None, known_sha256=None, op: str = "verify") -> int:
        assert not self.closed, "the verifier client is closed"
        self._next += 1
        self.asked.append(("reload", op, Path(path)))
        self._answers[self._next] = self._judge(self._next, Path(path), op)
        return self._next

    def _judge(self, rid: int, path: Path, op: str) -> FileVerdict:
        try:
            blob = path.read_bytes()
        except IsADirectoryError:
            blob = b""
        except OSError as error:
            return FileVerdict.failed(rid, str(path), f"cannot read: {error.strerror}", 1)
        assert blob.startswith(FAKE_CHECKPOINT), (
            f"{path.name} is not a fake checkpoint (tests/fakewrapup.py): reloading real "
            "files is the real verifier's to test (a slow test)")
        said = json.loads(blob[len(FAKE_CHECKPOINT):])
        if op == "globals":
            return FileVerdict(rid, str(path), True, needs=tuple(said.get("needs", ())))
        said.setdefault("sha256", hashlib.sha256(blob).hexdigest())
        said.setdefault("bytes", len(blob))
        return FileVerdict.from_json(rid, str(path), said, 1)

    def wait_for(self, ids, timeout=None) -> dict[int, FileVerdict]:
        return {i: self._answers.pop(i) for i in ids}

    def verify(self, path, **kwargs) -> FileVerdict:
        rid = self.submit(path, **kwargs)
        return self.wait_for([rid])[rid]

    def close(self) -> None:
        self.closed = True


class FakeWrapup:
    """The wrap-up's helpers (tui.bundle.helpers.WrapupHelpers), none a process."""

    def __init__(self, draw_problem: str | None = None):
        self.draw_problem = draw_problem
        self.asked: list[tuple] = []  # ("git", args) | ("draw", names) | ("reload", op, path)

    def kinds(self) -> list[str]:
        return [a[0] for a in self.asked]

    # -- the port ----------------------------------------------------------------------
    def git(self, root: Path, *args: str) -> str:
        self.asked.append(("git", args))
        here = Path(root).resolve()
        repo = next((p for p in (here, *here.parents) if (p / ".git").exists()), None)
        assert repo is None, (
            f"the campaign is inside a git repository ({repo}): its snapshot is the real "
            "git's to test (a slow test)")
        raise RuntimeError("fatal: not a git repository (or any of the parent directories): "
                           ".git")

    def draw(self, panels, out_dir: Path) -> Drawing:
        self.asked.append(("draw", tuple(p.name for p in panels)))
        if self.draw_problem is not None:
            return Drawing((), {}, self.draw_problem)
        out_dir.mkdir(parents=True, exist_ok=True)
        drawn = {}
        for panel in panels:
            (out_dir / f"{panel.name}.png").write_bytes(PLACEHOLDER_PNG)
            (out_dir / f"{panel.name}.svg").write_text(PLACEHOLDER_SVG)
            spec = json.loads(json.dumps(asdict(panel)))
            drawn[panel.name] = {
                "legend": [s.label for s in panel.series] + [line.label for line in panel.lines],
                "ylim": list(panel.ylim) if panel.ylim else None,
                "yscale": "log" if panel.log else "linear",
                "title": panel.title + (f"\n{panel.note}" if panel.note else ""),
                "ylabel": panel.ylabel, "note": panel.note, "lines": spec["lines"],
                "series": series_record(spec)}
        (out_dir / "figures.json").write_text(json.dumps(
            {"format": "itera-figures/2", "matplotlib": None, "drawn_by": "tests/fakewrapup.py",
             "figures": drawn}, indent=1) + "\n")
        files = tuple(f"{p.name}.{ext}" for name in FIGURES for p in panels if p.name == name
                      for ext in ("png", "svg"))
        return Drawing(files + ("figures.json",), drawn)

    def reloader(self) -> Reloader:
        return Reloader(FakeVerifier(self.asked))
