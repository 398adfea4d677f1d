"""`itera-tui check --hosts`: each other box asked once over ssh whether it can run its share.

One ssh call per host (a POSIX sh script on stdin, with a deadline) reports what a
start there needs: the box answers, python3 is there and recent enough, itera-tui
is importable there and is the same (version and source digest as this box's), the
campaign folder's disk has room, rsync is there for the copy, and whether
`nvidia-smi` sees GPUs. Each host gets one line; a host that cannot go on makes
`check` exit 2. Nothing the far side prints reaches the terminal raw.
"""

from __future__ import annotations

import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from ..campaign.boxes import BoxShare, box_shares
from ..campaign.plan import Plan
from .fingerprint import source_digest, version
from .ssh import Ssh, SshSettings

PROBE_TIMEOUT_S = 60.0
MIN_PYTHON = (3, 11)

_PROBE = r"""
cd "$HOME" 2>/dev/null || true
echo probe=1
if [ -n "$ITERA_PYTHON" ]; then
  py=$ITERA_PYTHON
  if [ ! -x "$py" ]; then echo "python_absent=$py"; py=; fi
else
  py=$(command -v python3 || true)
fi
echo "python=$py"
if [ -n "$py" ]; then
"$py" - <<'ITERA_PY'
import sys
print("python_version=%d.%d.%d" % sys.version_info[:3])
try:
    import tui
    print("itera_version=" + str(getattr(tui, "__version__", "?")))
except Exception as exc:
    print("itera_missing=" + type(exc).__name__)
else:
    try:
        from tui.remote.fingerprint import source_digest
        print("itera_digest=" + source_digest())
    except Exception as exc:
        print("itera_digest=unknown")
try:
    import pip
    print("pip=1")
except Exception:
    print("pip=0")
ITERA_PY
fi
d=$ITERA_DIR
while [ ! -d "$d" ]; do d=$(dirname "$d"); done
df -Pk "$d" | awk 'NR==2 {print "free_kb=" $4}'
if command -v rsync >/dev/null 2>&1; then echo rsync=1; else echo rsync=0; fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed 's/^/gpu=/'
  echo nvidia_smi=1
else
  echo nvidia_smi=0
fi
"""


@dataclass(frozen=True)
class HostCheck:
    """What one host answered, and the one line `check --hosts` prints for it."""

    box: str
    lots: tuple[str, ...]
    ok: bool  # a start can go on there
    line: str
    facts: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict:
        return {"box": self.box, "lots": list(self.lots), "ok": self.ok, "line": self.line,
                "facts": dict(self.facts)}


def printable(text: str, limit: int = 200) -> str:
    """Far-side text made safe for a terminal: no control characters, bounded."""
    return "".join(c if c.isprintable() else "?" for c in text)[:limit]


def probe_script(far_dir: str, python: str | None = None) -> str:
    """`python`: the lot's interpreter as a far shell names it (BoxShare.far_python)."""
    chosen = f"ITERA_PYTHON={python}\n" if python else "ITERA_PYTHON=\n"
    return f"ITERA_DIR={shlex.quote(far_dir)}\n" + chosen + _PROBE


def parse_facts(stdout: str) -> dict[str, list[str]]:
    facts: dict[str, list[str]] = {}
    for line in stdout.splitlines()[:200]:
        key, sep, value = line.partition("=")
        if sep and key.isidentifier():
            facts.setdefault(key, []).append(printable(value.strip()))
    return facts


def folder_bytes(root: Path, skip: tuple[str, ...] = (".itera",)) -> int:
    """What the copy of the campaign folder will take there (state and outputs aside)."""
    total = 0
    for path in root.rglob("*"):
        if any(part in skip for part in path.relative_to(root).parts):
            continue
        try:
            if path.is_file() and not path.is_symlink():
                total += path.stat().st_size
        except OSError:
            continue
    return total


def check_host(share: BoxShare, settings: SshSettings, need_bytes: int,
               timeout_s: float = PROBE_TIMEOUT_S) -> HostCheck:
    """One host, one ssh call, one line; never raises for what the far side does."""
    head = f"{share.box} (lot{'s' if len(share.lots) > 1 else ''} {', '.join(share.lots)})"
    ssh = Ssh(share.host, settings)
    result = ssh.run_script(probe_script(share.dir or ".", share.far_python
                                         if share.python else None), timeout_s=timeout_s)
    facts = parse_facts(result.stdout)
    flat = tuple((k, ", ".join(v)) for k, v in facts.items())

    def done(ok: bool, text: str) -> HostCheck:
        return HostCheck(share.box, share.lots, ok, f"{head}: {text}", flat)

    if result.unreachable or "probe" not in facts:
        return done(False, f"unreachable: {printable(result.reason() or 'no answer')}")
    here_version, here_digest = version(), source_digest()
    wanted = share.python  # [[lot]] python, as written
    if "python_absent" in facts:
        return done(False, f"python: {wanted} is not there (or not executable); give the "
                           "interpreter itera-tui is installed in there ([[lot]] python)")
    if not facts.get("python", [""])[0]:
        return done(False, "no python3 on its PATH; install Python 3.11 or newer there, or "
                           "name the interpreter to use ([[lot]] python = \"/path/bin/python\")")
    py_path = facts["python"][0]
    pyver = facts.get("python_version", ["?"])[0]
    if _version_tuple(pyver) < MIN_PYTHON:
        return done(False, f"python: {py_path} there is {pyver}; itera-tui needs 3.11 or "
                           "newer" + ("" if wanted else " (name another with [[lot]] python)"))
    if "itera_missing" in facts:
        how = (f"install it: `{py_path} -m pip install itera-tui=={here_version}` there"
               if facts.get("pip") == ["1"] else "and that python has no pip to install it")
        hint = "" if wanted else (" (a login shell may put another python first: name the "
                                  "one it is in with [[lot]] python)")
        return done(False, f"package: itera-tui is not installed in {py_path} (python "
                           f"{pyver}) there; {how}{hint}")
    far_version = facts.get("itera_version", ["?"])[0]
    far_digest = facts.get("itera_digest", ["unknown"])[0]
    if far_version != here_version or far_digest != here_digest:
        return done(False, f"version: itera-tui in {py_path} there is {far_version} (code "
                           f"{far_digest[:12]}), this box runs {here_version} (code "
                           f"{here_digest[:12]}): install the same copy there")
    if facts.get("rsync") != ["1"]:
        return done(False, "no rsync there; the campaign folder is copied with rsync")
    free = int(facts["free_kb"][0]) * 1024 if facts.get("free_kb", [""])[0].isdigit() else None
    if free is not None and free < need_bytes:
        return done(False, f"{_size(free)} free for {share.dir}, the campaign folder needs "
                           f"{_size(need_bytes)}")
    gpus = facts.get("gpu") or []
    seen = (f"nvidia-smi sees {len(gpus)} GPU{'s' if len(gpus) != 1 else ''}: "
            f"{', '.join(sorted(set(gpus)))}" if gpus else
            "nvidia-smi sees no GPU" if facts.get("nvidia_smi") == ["1"] else "no nvidia-smi")
    room = f"{_size(free)} free" if free is not None else "free disk unknown"
    return done(True, f"ready: python {pyver} ({py_path}), itera-tui {far_version} (same code), "
                      f"{room} for {share.dir}, rsync, {seen}")


def check_hosts(plan: Plan, settings: SshSettings | None = None,
                timeout_s: float = PROBE_TIMEOUT_S) -> list[HostCheck]:
    """Every other box of the plan, asked at once (each call has its own deadline)."""
    return each_host(plan, settings, lambda s, settings, need: check_host(
        s, settings, need, timeout_s))


def each_host(plan: Plan, settings: SshSettings | None, act) -> list[HostCheck]:
    """`act(share, settings, bytes the campaign folder needs)` for every other box of the
    plan, at most 8 at once: one home for the fan-out that check and install share."""
    settings = settings or SshSettings.from_env()
    remote = [s for s in box_shares(plan) if s.remote]
    if not remote:
        return []
    need = folder_bytes(plan.root)
    with ThreadPoolExecutor(max_workers=min(8, len(remote))) as pool:
        return list(pool.map(lambda s: act(s, settings, need), remote))


def _version_tuple(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in text.split(".")[:2])
    except ValueError:
        return (0,)


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"
