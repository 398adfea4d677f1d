"""Helpers for engine process tests: write a one-lot campaign, drive an Engine."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

from tui.campaign import load_plan
from tui.engine import Engine

PRINTER = Path(__file__).parent / "scripts" / "printer.py"


def printer_cmd(*args: str) -> str:
    return repr([sys.executable, str(PRINTER), *args]).replace("'", '"')


def write_plan(root: Path, variants: str, extra: str = "", gpus: int = 1,
               pilot: str = "") -> Path:
    text = textwrap.dedent(f"""
        [campaign]
        name = "t"
        question = "q"
        metric = "acc"

        [[lot]]
        gpu = "cpu"
        hours = 1
        price_usd = 1.0
        gpus = {gpus}

        [metrics]
        step = 'step (\\d+)'
        loss = 'loss[:=]? *(\\S+)'
        acc = 'acc=(\\S+)'
        truncated = 'truncated=(\\d+)'

        [engine]
        grace_seconds = 1.0
    """) + textwrap.dedent(pilot) + textwrap.dedent(variants) + textwrap.dedent(extra)
    path = root / "campaign.toml"
    path.write_text(text)
    return path


def drive(path: Path, timeout: float = 60, decide: str | None = None, **kw) -> Engine:
    engine = Engine(load_plan(path), poll_interval=0.05, decide=decide, **kw).open()
    deadline = time.time() + timeout
    try:
        while not engine.finished:
            assert time.time() < deadline, "campaign did not finish in time"
            engine.tick()
            time.sleep(0.05)
    finally:
        engine.close()
    return engine
