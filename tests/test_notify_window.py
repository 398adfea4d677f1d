"""The window notice's lead time fits the window and its slack, and the notice is sent
once per campaign, not once per engine start (issue 36, item 4).

A 60-minute lead on a 20-minute window said "wrap up now" two seconds after
launch while the header said `slack +13 min ok`, and again after a restart.
Campaigns on the engine's fake processes and clocks (tests/fakeprocs.py), real notices
to a real HTTP receiver on 127.0.0.1 (a thread of the test: no process started).
"""

from __future__ import annotations

from enginekit import printer_cmd, write_plan
from fakeprocs import drive_session
from test_notify import FakeClock  # the engine's fake clocks, with their fake processes
from test_notify_campaign import receiver  # noqa: F401 - a fixture
from tui.engine import read_ledger


def test_the_lead_is_a_quarter_of_a_short_window_and_earlier_by_the_overrun():
    from tui.notify.notices import window_lead_s

    assert window_lead_s(3600, 20 * 60, 13 * 60) == 5 * 60  # the newcomer's demo
    assert window_lead_s(3600, 24 * 3600, 3600) == 3600  # a day-long window: as configured
    assert window_lead_s(3600, 20 * 60, -10 * 60) == 15 * 60  # behind: told earlier
    assert window_lead_s(3600, 20 * 60, -3 * 3600) == 3600  # never beyond the configured
    assert window_lead_s(1800, None, None) == 1800


def _campaign(root, url: str, minutes: float, lot: str, steps: str = "80",
              campaign: str = "") -> object:
    variants = f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", steps, "--sleep", "0.05")}
    minutes = {minutes}
    """
    path = write_plan(root, variants, f'\n[notify]\nurls = ["{url}"]\non = ["window"]\n')
    path.write_text(path.read_text().replace("hours = 1\n", lot)
                    .replace('metric = "acc"\n', 'metric = "acc"\n' + campaign))
    return path


def _drive(path, until, clock: FakeClock, timeout: float = 90.0) -> None:
    drive_session(path, until, clock, clock.procs, timeout=timeout)



def test_a_20_minute_window_with_slack_is_not_told_it_ends_at_launch(tmp_path, receiver):  # noqa: F811
    rx = receiver()
    path = _campaign(tmp_path, rx.url(), 1, "minutes = 20\n")
    _drive(path, lambda snap: snap.engine.finished, FakeClock())
    assert rx.titles() == []  # the default 60-minute lead on a 20-minute window: not yet


def test_the_window_notice_is_sent_once_per_campaign_across_engine_starts(tmp_path, receiver):  # noqa: F811
    rx = receiver()
    path = _campaign(tmp_path, rx.url(), 1, "hours = 1\n", steps="500",
                     campaign="wrapup_hours = 2\n")  # projected an hour past the window
    clock = FakeClock()
    _drive(path, lambda snap: rx.titles(), clock)  # told at once: the work cannot fit
    assert len(rx.titles()) == 1
    assert "past it: wrap up now" in rx.notices()[0]["message"]
    events = read_ledger(tmp_path / ".itera" / "ledger.jsonl")
    assert [e["kind"] for e in events if e["event"] == "notice_sent"] == ["window"]
    _drive(path, lambda snap: snap.engine.finished, clock)  # a second start, runs reattached
    assert len(rx.titles()) == 1, rx.titles()
