"""`itera-tui wrapup` follows the engine's real wrap-up (issue 36, item 2).

On a campaign whose bundle was verified already, the command used to answer
"bundle verified" from the last wrap-up's result before the new one had begun,
print every line stamped with the second it read them, and leave a
`wrapup_done` in the ledger that no `wrapup_started` opened. Now it returns
when the wrap-up it asked for is done, with that one's result and the times
its lines were said, and every `wrapup_done` has its own start.
"""

from __future__ import annotations

import re
import time

import pytest

from conftest import run_cli
from servicekit import end_engine, wait_until
from test_app_support import campaign, events_of, ledger


def _done_after(path, t: float) -> list[dict]:
    return [e for e in events_of(path, "wrapup_done") if e["t"] >= t]


@pytest.mark.slow
def test_wrapup_on_a_verified_campaign_returns_when_its_own_rebuild_is_done(tmp_path):
    path = campaign(tmp_path, [("control", "mandatory", ["--steps", "20"])])
    try:
        started = run_cli("engine", "start", str(path), cwd=tmp_path)
        assert started.returncode == 0, started.stderr
        wait_until(lambda: events_of(path, "wrapup_done"), 180, "the engine's own wrap-up")
        wait_until(lambda: not (tmp_path / "outputs" / ".staging").exists(), 30, "staging gone")
        asked = time.time()
        done = run_cli("wrapup", str(path), cwd=tmp_path, timeout=300)
        returned = time.time()
        assert done.returncode == 0, done.stdout + done.stderr
        assert "bundle verified" in done.stdout
        ours = _done_after(path, asked)
        assert len(ours) == 1 and ours[0]["verified"] is True, ours  # this rebuild's verdict
        kinds = [e["event"] for e in ledger(path) if e["event"].startswith("wrapup_")]
        assert kinds == ["wrapup_started", "wrapup_done"] * 2, kinds  # each done, its start
        rebuilt = [e for e in events_of(path, "wrapup_started") if e["t"] >= asked]
        assert rebuilt and rebuilt[0]["t"] <= ours[0]["t"] <= returned
        stamps = re.findall(r"^\[(\d\d):(\d\d):(\d\d)\] ", done.stdout, re.M)
        assert stamps, done.stdout  # the wrap-up's own lines, each with its time
        said = [int(h) * 3600 + int(m) * 60 + int(s) for h, m, s in stamps]
        local = time.localtime(asked)
        first = local.tm_hour * 3600 + local.tm_min * 60 + local.tm_sec
        assert said == sorted(said) and said[0] >= first - 1
    finally:
        end_engine(tmp_path)


def test_a_client_follows_the_wrapup_it_asked_for_not_the_one_before():
    """follow_wrapup: the result of a wrap-up that ended before the request is not the
    answer; the new one's lines come with the times they were said."""
    from tui.service.client import EngineClient
    from tui.session.snapshot import WrapupProgress

    old = WrapupProgress(ok=True, text="bundle verified: outputs/bundle", lines=("a",),
                         started_t=100.0, times=(101.0,), attempted=True)
    new_running = WrapupProgress(running=True, lines=("stopping",), started_t=200.0,
                                 times=(201.0,), attempted=True)
    new_done = WrapupProgress(ok=True, text="bundle verified: outputs/bundle",
                              lines=("stopping", "verifying"), started_t=200.0,
                              times=(201.0, 230.0), attempted=True)
    seen = iter([old, old, new_running, new_done])
    client = EngineClient(lambda: None, reconnect=False)
    client.wrapup_progress = lambda: next(seen)
    said = []
    got = client.follow_wrapup(old, lambda t, line: said.append((t, line)), timeout=30)
    assert got is new_done
    assert said == [(201.0, "stopping"), (230.0, "verifying")]
