"""`itera-tui status` words and the states docs/commands.md lists (issue 44, item 6)."""

from __future__ import annotations

import json
import re

from conftest import REPO
from test_app_support import SNAP_TOML, snapshot_events
from tui.engine.ledger.state import RUN_STATES
from tui.service.status import print_status


def test_a_running_run_is_not_judged_yet_rather_than_not_accepted(tmp_path, capsys, utc):
    (tmp_path / "campaign.toml").write_text(SNAP_TOML)
    (tmp_path / ".itera").mkdir()
    events = snapshot_events(True)  # control·run and lora16·run are running
    (tmp_path / ".itera" / "ledger.jsonl").write_text(
        "".join(json.dumps(ev) + "\n" for ev in events))
    assert print_status(tmp_path / "campaign.toml") == 0
    out = capsys.readouterr().out
    assert "not judged yet: control-77aa88bb-1: still running (judged when it ends)" in out
    assert not re.search(r"not accepted: \S+: still running", out), out
    # the cost per accepted model is not a result yet: it says so, never a bare "undefined"
    assert re.search(r"per accepted \S+: none accepted yet \(\d+ runs? not judged yet: known "
                     r"when they end\)", out), out


def test_the_run_states_status_json_can_hold_are_all_in_the_docs():
    text = " ".join((REPO / "docs" / "commands.md").read_text().split())
    (listed,) = re.findall(r"`state` in ([a-z|]+)", text)
    assert set(listed.split("|")) == set(RUN_STATES)


def test_status_names_the_bundle_once_the_wrapup_built_it(tmp_path, capsys, utc):
    """A resumed campaign sat at "phase wrapup" in `status` with no word of its bundle
    (issue 40, item 2): `status` names it as the ending does, verified or not."""
    (tmp_path / "campaign.toml").write_text(SNAP_TOML)
    (tmp_path / ".itera").mkdir()
    events = snapshot_events(False)
    t, seq = events[-1]["t"] + 1, events[-1]["seq"]
    ledger = tmp_path / ".itera" / "ledger.jsonl"
    for verified, said in ((False, "bundle: outputs/bundle (NOT verified: 3 failures; "
                                   "`itera-tui verify outputs/bundle` names them)"),
                           (True, "bundle: outputs/bundle (verified)")):
        done = [{"seq": seq + 1, "t": t, "event": "wrapup_started"},
                {"seq": seq + 2, "t": t + 1, "event": "wrapup_done", "bundle": "outputs/bundle",
                 "verified": verified, "failures": 0 if verified else 3, "bytes": 100}]
        ledger.write_text("".join(json.dumps(ev) + "\n" for ev in events + done))
        assert print_status(tmp_path / "campaign.toml") == 0
        assert f"  {said}\n" in capsys.readouterr().out
