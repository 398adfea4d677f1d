"""Keep this machine's paths out of a bundle, and find the ones that got in.

A bundle is copied off the box; an absolute path of the box (the campaign
directory, the home directory, a temporary directory) means nothing on the
machine that receives it, and a deliverable that depends on a temp dir will
break there. The wrap-up rewrites the campaign directory to `.` and the home
directory to `~` in every text file it copies (`Scrubber`); the verifier
then refuses any text file that still mentions a temp dir or an absolute
directory of the machine it runs on (`find_machine_paths`).

A run's captured stdout/stderr is different: it is evidence, not output, and
an ordinary torch `UserWarning` names a site-packages file. Logs are kept,
with more of this machine rewritten (`LogRedactor`: also the Python install,
site-packages and temp dirs) and the original's hash recorded; a path left in
a log is never a verification failure. The report goes through the same
redactor, so it never quotes a raw path either.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import site
import sys
import tempfile
from pathlib import Path

TEXT_SNIFF = 8192
# A path ends where a path character cannot continue it ("/home/ann" is not in "/home/anna").
_END = r"(?![\w.\-~])"
_START = r"(?<![\w.\-~/])"
TEMP_ROOTS = ("/tmp", "/var/tmp", "/dev/shm")


def is_text(data: bytes, *, partial: bool = False) -> bool:
    """Text is valid UTF-8 with no NUL byte (a torch file or an image is neither).

    `partial`: `data` is a file's first bytes, which may end inside a character
    ("é" is two bytes); a character cut at the end is not a sign of binary data."""
    if b"\0" in data[:TEXT_SNIFF]:
        return False
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=not partial)
    except UnicodeDecodeError:
        return False
    return True


def home_dir() -> str | None:
    home = os.path.expanduser("~")
    return home if home not in ("", "/", "~") else None


def _pattern(prefix: str) -> re.Pattern:
    return re.compile(_START + re.escape(prefix.rstrip("/")) + _END)


class Scrubber:
    """Rewrites the campaign directory to `.` and the home directory to `~`."""

    def __init__(self, campaign_dir: Path, home: str | None = None):
        home = home_dir() if home is None else home
        prefixes = [(real, _pattern(real), ".") for real in
                    {str(campaign_dir), os.path.realpath(campaign_dir)}]
        if home:
            prefixes += [(real, _pattern(real), "~") for real in {home, os.path.realpath(home)}]
        self._set(prefixes)

    def _set(self, prefixes: list[tuple[str, re.Pattern, str]]) -> None:
        # the longest prefix first, so a campaign inside the home becomes "." not "~/..."
        self.prefixes = sorted(prefixes, key=lambda item: -len(item[0].rstrip("/")))
        self.rules = [(pattern, replacement) for _, pattern, replacement in self.prefixes]

    def hide(self, secrets) -> None:
        """Also rewrite each of `secrets` (literal text: a token) to `***`."""
        self._set(self.prefixes + [(x, re.compile(re.escape(x)), "***") for x in secrets])

    def text(self, text: str) -> str:
        for pattern, replacement in self.rules:
            text = pattern.sub(replacement, text)
        return text

    def data(self, data: bytes) -> tuple[bytes, bool]:
        """(bytes to write, whether anything was rewritten); binary data is left alone."""
        if not is_text(data):
            return data, False
        before = data.decode("utf-8")
        after = self.text(before)
        return (after.encode("utf-8"), True) if after != before else (data, False)

    @staticmethod
    def note() -> dict:
        return {"campaign_dir": ".", "home_dir": "~",
                "note": "in copied text files the campaign directory's absolute path was "
                        "replaced with '.' and the home directory with '~'; the original "
                        "sha256 of each rewritten file is kept as source_sha256"}


def _real_variants(paths) -> set[str]:
    out = set()
    for p in paths:
        if p and len(p.rstrip("/")) > 1:
            out |= {p.rstrip("/"), os.path.realpath(p).rstrip("/")}
    return out


def python_dirs() -> list[tuple[str, str]]:
    """(directory, placeholder) for this machine's Python: site-packages, then the prefix."""
    sites = list(getattr(site, "getsitepackages", lambda: [])())
    user = getattr(site, "getusersitepackages", lambda: "")()
    sites += [user] if isinstance(user, str) else []
    out = [(d, "<site-packages>") for d in _real_variants(sites)]
    out += [(d, "<python>") for d in _real_variants(
        [sys.prefix, sys.base_prefix, sys.exec_prefix])]
    return out


class LogRedactor(Scrubber):
    """Scrubber for logs and the report: also site-packages (`<site-packages>`),
    the Python install (`<python>`) and temp dirs (`<tmp>`), longest first."""

    def __init__(self, campaign_dir: Path, home: str | None = None):
        super().__init__(campaign_dir, home)
        temps = _real_variants([tempfile.gettempdir(), *TEMP_ROOTS])
        extra = [(d, _pattern(d), what) for d, what in python_dirs()]
        extra += [(d, re.compile(_START + re.escape(d) + r"(?=/|" + _END + ")"), "<tmp>")
                  for d in temps]
        self._set(self.prefixes + extra)

    @staticmethod
    def note() -> dict:
        return {"placeholders": {".": "the campaign directory", "~": "the home directory",
                                 "<site-packages>": "Python's site-packages directory",
                                 "<python>": "the Python installation (sys.prefix)",
                                 "<tmp>": "a temporary directory"},
                "note": "captured stdout.log/stderr.log and the ledger copy are evidence: "
                        "redacted (redacted: true, the original's sha256 as source_sha256), "
                        "and a path left in them is not a verification failure"}


_ABSOLUTE = re.compile(_START + r"/(?:[\w.\-~]+/)*[\w.\-~]+")


def without_paths(text: str, redactor: Scrubber) -> str:
    """`text` for the report: this machine's paths rewritten, any other absolute path
    replaced by `<path>` (a failure may quote one; the report never does)."""
    return _ABSOLUTE.sub("<path>", redactor.text(text))


def machine_needles(bundle: Path) -> list[tuple[re.Pattern, str]]:
    """(pattern, what it is) for every path that must not appear in a bundle's text."""
    needles: dict[str, str] = {}
    temp = tempfile.gettempdir()
    for root in {temp, os.path.realpath(temp), *TEMP_ROOTS}:
        if root and root != "/":
            needles[root.rstrip("/")] = "a temporary directory"
    home = home_dir()
    if home:
        for real in {home, os.path.realpath(home)}:
            needles.setdefault(real.rstrip("/"), "the home directory")
    for parent in [bundle.resolve(), *bundle.resolve().parents]:
        # "/work/x" is specific to this machine; "/" and "/work" alone are too short to say so
        if len(parent.parts) >= 3:
            needles.setdefault(str(parent), "an absolute directory of this machine")
    out = []
    for prefix, what in sorted(needles.items(), key=lambda kv: -len(kv[0])):
        if what == "a temporary directory":
            # a temp path is what follows the prefix: "/tmp/x", or the bare dir name
            out.append((re.compile(_START + re.escape(prefix) + r"(?:/|" + _END + ")"), what))
        else:
            out.append((_pattern(prefix), what))
    return out


def find_machine_paths(text: str, needles) -> list[str]:
    """Problems for each kind of machine path found in `text` (first hit per kind)."""
    problems, seen = [], set()
    for pattern, what in needles:
        if what in seen:
            continue
        m = pattern.search(text)
        if m is None:
            continue
        seen.add(what)
        line = text.count("\n", 0, m.start()) + 1
        end = text.find("\n", m.start())
        shown = text[m.start(): end if end != -1 else len(text)][:80]
        problems.append(f"mentions {what} ({shown!r}, line {line})")
    return problems


def command_paths(found: dict[str, Path], listed: dict) -> list[re.Pattern]:
    """The absolute paths the recorded commands name (`python /home/me/train.py`), from
    each listed run's params.json argv: where a script was on the box is provenance,
    kept in the bundle as it ran and never a failure of it. Whole paths only."""
    tokens = set()
    for rel, full in found.items():
        parts = rel.split("/")
        if not (len(parts) == 3 and parts[0] == "runs" and parts[2] == "params.json"
                and rel in listed and full.is_file() and not full.is_symlink()):
            continue
        try:
            argv = json.loads(full.read_text())["config"]["argv"]
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            continue
        for token in argv if isinstance(argv, list) else []:
            if isinstance(token, str) and token.startswith(("/", "~/")) and token.count("/") >= 2:
                tokens.add(token)
    return [re.compile(r"(?<![\w.\-~/])" + re.escape(t) + r"(?![\w.\-~/])")
            for t in sorted(tokens, key=len, reverse=True)]
