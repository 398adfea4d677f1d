"""Drive the control room through a whole tiny campaign in this process, then report
which heavy modules it loaded (control-room tests: the room must never import torch).

Usage: room_lifecycle.py CAMPAIGN_TOML   -> prints one JSON line
"""

import asyncio
import json
import sys
import time
from pathlib import Path

from tui.app.app import ControlRoom
from tui.campaign import load_plan
from tui.session import CampaignSession, default_probes


async def main(path: Path) -> dict:
    plan = load_plan(path)
    session = CampaignSession(plan, probes=default_probes(plan), poll_interval=0.1,
                              sample_interval=0.2).open()
    app = ControlRoom(plan, session, tick_interval=0.1)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            deadline = time.monotonic() + 90
            while session.wrapup_progress().ok is None and time.monotonic() < deadline:
                await pilot.pause(0.1)
            await pilot.press("q")
    finally:
        session.wait_wrapup(60)
        session.close()
    wrap = session.wrapup_progress()
    return {"wrapup": {"ok": wrap.ok, "text": wrap.text}, "torch": "torch" in sys.modules,
            "textual": "textual" in sys.modules,
            "heavy": sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "numpy"))}


print(json.dumps(asyncio.run(main(Path(sys.argv[1])))))
