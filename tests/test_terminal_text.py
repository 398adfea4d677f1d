"""Text a run, a file or a campaign controls never reaches a terminal raw.

OSC 52 (`ESC ] 52 ; c ; <base64> BEL`) writes the person's clipboard, through
tmux too; `ESC [ 2 J` clears their screen; a bare CR rewrites the line they
read. Each is made visible by the one cleaning function, wherever such text
is shown: `check`, `status`, the event lines (headless log and room), the
stop reasons and checkpoint problems every view reads, the run's tails.
"""

import io
import json

from clikit import cli
from tui.engine.ledger.events import CheckpointVerified, StopRuleFired
from tui.app.tails import clean as tail_clean
from tui.campaign.text import TerminalGuard, for_terminal
from tui.engine.ledger.lines import describe
from tui.engine.ledger.records import StopRecord, Verification

OSC52 = "\x1b]52;c;aGFja2Vk\x07"
CLEAR = "\x1b[2J\x1b[H"
C1_CSI = "\x9b2J"
HOSTILE = f"loss {OSC52}{CLEAR}{C1_CSI}\rfine"


def raw(text: str) -> bool:
    return any(ch in text for ch in "\x1b\x07\x9b\r")


def test_the_cleaning_function_makes_every_control_visible():
    shown = for_terminal(HOSTILE)
    assert not raw(shown)
    assert shown == ("loss \\x1b]52;c;aGFja2Vk\\x07\\x1b[2J\\x1b[H\\x9b2J\\x0dfine")
    assert for_terminal("plain text, unchanged: é ü 日本") == "plain text, unchanged: é ü 日本"
    assert for_terminal("a\nb") == "a\\x0ab" and for_terminal("a\nb", lines=True) == "a\nb"
    assert for_terminal("rtl \u202etxt.exe") == "rtl \\u202etxt.exe"


def test_a_guarded_stream_cleans_every_write():
    sink = io.StringIO()
    guard = TerminalGuard(sink)
    print("name:", HOSTILE, file=guard)
    assert not raw(sink.getvalue()) and sink.getvalue().endswith("fine\n")


def test_event_lines_stop_reasons_and_problems_are_cleaned():
    line = describe({"seq": 1, "event": "stop_rule_fired", "run": "a-1", "rule": "threshold",
                     "reason": HOSTILE, "t": 1.0})
    assert "\\x1b]52" in line and not raw(line)
    stop = StopRecord.from_event(StopRuleFired(run="a-1", rule="threshold", reason=HOSTILE,
                                               t=1.0))
    assert not raw(stop.reason)
    check = Verification.from_event(CheckpointVerified(run="a-1", path="ckpt.pt", ok=False,
                                                       problem=OSC52, t=1.0))
    assert not raw(check.problem) and check.path == "ckpt.pt"


def test_a_run_tail_shows_escapes_and_drops_only_colours():
    assert tail_clean("\x1b[32mok\x1b[0m") == "ok"
    assert tail_clean(f"x {OSC52}") == "x \\x1b]52;c;aGFja2Vk\\x07"


CAMPAIGN = """
[campaign]
name = "demo\\u001b]52;c;aGFja2Vk\\u0007\\u001b[2J"
question = "does b beat the control?"

[[lot]]
gpu = "RTX 4090"
days = 3

[[variant]]
id = "control"
category = "mandatory"
command = ["python", "train.py"]
hours = 10
"""


def test_check_and_status_never_print_a_hostile_campaign_name_raw(write_campaign):
    path = write_campaign(CAMPAIGN)
    for args in (("check", str(path), "--no-files"), ("status", str(path))):
        done = cli(*args)
        assert "demo" in done.stdout + done.stderr, (args, done.stdout, done.stderr)
        assert not raw(done.stdout) and not raw(done.stderr), args
        assert "\\x1b]52" in done.stdout + done.stderr
    done = cli("check", str(path), "--no-files", "--json")
    assert json.loads(done.stdout)  # JSON output is unchanged and still parses


def test_a_warning_from_the_ledger_is_cleaned_where_it_is_replayed():
    from tui.engine.ledger.state import replay

    state = replay([{"seq": 1, "t": 1.0, "event": "warning", "message": f"metrics {OSC52}"}])
    assert not raw(state.warnings[0].message) and "\\x1b]52" in state.warnings[0].message
