"""A campaign over two boxes on this machine: this folder, and a second folder reached
through the test sshd (tests/sshkit.py) as lot "b"'s host."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).parent / "scripts"))

from bundlekit import deliver_cmd, write_campaign  # noqa: E402
from enginekit import wait_for  # noqa: E402

SECOND_LOT = """
    [[lot]]
    id = "b"
    gpu = "RTX 4090"
    days = 3
    host = "{alias}"
    dir = "{far_dir}"
"""


FAR_DIR = "camp"  # lot b's dir: from the far home (an absolute temp path would reach the bundle)


def far_root(sshd, far_dir: str = FAR_DIR) -> Path:
    """Where the second box's campaign folder is on this machine."""
    return sshd.root / "home" / far_dir


def two_box_campaign(root: Path, far_dir: str = FAR_DIR, alias: str = "box2",
                     wide: str = "", extra: str = "") -> Path:
    """control on this box (lot a), wide on the second box (lot b), both deliver."""
    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {deliver_cmd("--label", "control", "--acc-end", "0.70")}
    minutes = 2

    [[variant]]
    id = "wide"
    category = "useful"
    command = {wide or deliver_cmd("--label", "wide", "--acc-end", "0.80")}
    minutes = 2
    """
    path = write_campaign(root, variants, extra, gpus=1)
    text = path.read_text().replace('[[lot]]\ngpu = "RTX 4090"', '[[lot]]\nid = "a"\n'
                                    'gpu = "RTX 4090"', 1)
    head, sep, rest = text.partition("[[expense]]")
    path.write_text(head + SECOND_LOT.format(alias=alias, far_dir=far_dir)
                    .replace("\n    ", "\n") + "\n" + sep + rest)
    return path


def far_ledger(far_dir: Path) -> Path:
    return Path(far_dir) / ".itera" / "ledger.jsonl"


wait_until = wait_for  # the one wait (enginekit), under the name these tests use


def processes_under(folder: Path) -> list[psutil.Process]:
    """Engines and runs working in `folder` (the second box's), found by cwd or run dir."""
    folder = str(Path(folder).resolve())
    out = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid == os.getpid():
                continue
            cwd = proc.cwd()
            run_dir = proc.environ().get("ITERA_RUN_DIR", "")
        except (psutil.Error, OSError):
            continue
        if cwd == folder or cwd.startswith(folder + os.sep) or run_dir.startswith(folder):
            out.append(proc)
    return out


def end_processes_under(folder: Path, timeout: float = 20) -> None:
    """End what the test started on the second box, each by its pid."""
    procs = processes_under(folder)
    for proc in procs:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    psutil.wait_procs(procs, timeout=timeout)
