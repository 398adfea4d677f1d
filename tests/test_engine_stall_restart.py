"""After a restart, a print-only script's backlog dates from when it was written."""

from __future__ import annotations

import os
import time

from tui.campaign.plan import StopRule
from tui.engine.watching.live import RunLive
from tui.engine.rules import RuleSet


def test_backlog_of_printed_lines_keeps_the_stall_timer_where_the_bytes_were_written(tmp_path):
    (tmp_path / "stdout.log").write_text("".join(f"step {i} loss 0.5\n" for i in range(1, 6)))
    written = time.time() - 300  # the script went quiet five minutes before the restart
    os.utime(tmp_path / "stdout.log", (written, written))
    stall = StopRule(rule="stall", minutes=2.0)
    live = RunLive("r", tmp_path, RuleSet((stall,), "v", "run"),
                   (("step", r"step (\d+)"), ("loss", r"loss (\S+)")), "acc", "max",
                   started_t=written - 60)
    now = time.time()
    assert live.poll(now) is None and live.view().records == 5
    assert abs(live.last_record_t - written) < 1.0  # not "now": the file's own time
    stop = live.rules.on_tick(now, live.started_t, live.last_record_t, False, "run")
    assert stop is not None and stop.rule == "stall"  # quiet for 5 min > the 2 min limit
