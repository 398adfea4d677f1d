"""`itera-tui resume URL`: the new box is a lot, given as campaign.toml gives a `[[lot]]`
(`--lot`, written inline as the help shows it), never an hourly price; and the command
the engine prints for a person to paste is taken, as pasted, by the parser and `resume`.

Fast tier: no process; the store is a `file://` folder.
"""

from __future__ import annotations

import re
import shlex

import pytest

from enginekit import printer_cmd, write_plan
from tui.campaign import load_plan
from tui.cli import main
from tui.service import resume as resume_mod

HELP_LOT = 'gpu = "RTX 4090", days = 3, price_usd = 47.14'


@pytest.fixture
def rentals(monkeypatch):
    """The rental `resume` would record, caught before anything is fetched."""
    seen = []

    def caught(url, dest, options, rental, part=None, force=False):
        seen.append(rental)
        raise resume_mod.ResumeRefused([f"{url}: caught by the test"])

    monkeypatch.setattr(resume_mod, "fetch_campaign", caught)
    return seen


def test_the_lot_written_as_the_help_shows_it_is_the_new_rental(tmp_path, capsys, rentals):
    code = main(["resume", f"file://{tmp_path}/store", str(tmp_path / "new"),
                 "--lot", HELP_LOT])
    assert code == 2 and "caught by the test" in capsys.readouterr().err
    assert rentals == [resume_mod.Rental(72.0, 47.14, "RTX 4090")]  # the lot's price, whole


def test_an_hourly_price_is_no_option_of_resume(tmp_path, capsys):
    for gone in (["--price-per-hour", "0.5"], ["--window-hours", "24"]):
        with pytest.raises(SystemExit) as exc:
            main(["resume", f"file://{tmp_path}", str(tmp_path / "new"), *gone])
        assert exc.value.code == 2 and gone[0] in capsys.readouterr().err


@pytest.mark.parametrize("lot, named", [
    ('gpu = "RTX 4090", price_usd = 47.14', "--lot: needs a duration"),
    ('gpu = "RTX 4090", days = -3, price_usd = 47.14', "--lot.days"),
    ('gpu = "RTX 4090", days = 3, price_usd = -1', "--lot.price_usd"),
    ('gpu = "RTX 4090", days = 3, price_usd = 47.14, gpus = 0', "--lot.gpus"),
    ('gpu = "no such card", days = 3', "--lot.price_usd"),
    ('gpu = "RTX 4090", days = 3, price_usd = 47.14, per_hour = 0.6', "per_hour"),
    ('gpu = RTX 4090, days = 3', "--lot: not a lot's key = value pairs"),
])
def test_a_lot_the_plan_would_refuse_is_refused_by_its_key(tmp_path, capsys, rentals, lot,
                                                           named):
    code = main(["resume", f"file://{tmp_path}/store", str(tmp_path / "new"), "--lot", lot])
    err = capsys.readouterr().err
    assert code == 2 and named in err and "nothing was started" in err, err
    assert rentals == [] and "Traceback" not in err


def test_no_lot_is_refused_with_the_form_to_give(tmp_path, capsys, rentals):
    assert main(["resume", f"file://{tmp_path}/store", str(tmp_path / "new")]) == 2
    assert "--lot 'gpu = " in capsys.readouterr().err and rentals == []


@pytest.mark.parametrize("lot, rental", [
    ('gpu = "RTX 4090"\ndays = 7\nprice_usd = 110', (168.0, 110.0)),  # as in campaign.toml
    ('{gpu = "RTX 4090", hours = 6, price_usd = 3.5, gpus = 2}', (6.0, 3.5)),
])
def test_a_lot_in_other_plain_forms_is_taken(tmp_path, rentals, lot, rental, capsys):
    main(["resume", f"file://{tmp_path}/store", str(tmp_path / "new"), "--lot", lot])
    assert [(r.window_hours, r.price_usd) for r in rentals] == [rental], \
        capsys.readouterr().err


def test_the_command_printed_to_continue_runs_as_pasted(tmp_path, capsys, rentals):
    """How to continue (the engine's notice after the box announced its end): its
    command, split as a shell splits it, with only DIR filled in, is taken by `resume`
    and names the lot the plan rents, at the lot's price."""
    from tui.engine.moves import how_to_continue

    root = tmp_path / "camp"
    root.mkdir()
    write_plan(root, f'[[variant]]\nid = "control"\ncategory = "mandatory"\n'
                     f'command = {printer_cmd()}\nminutes = 1\n', gpus=2, extra=f"""
[store]
url = "file://{tmp_path}/store with space"
options = {{ endpoint_url = "http://127.0.0.1:9" }}
""")
    plan = load_plan(root / "campaign.toml", check_files=False)
    plan.state_dir.mkdir(parents=True, exist_ok=True)  # the mirror stored its ledger: the
    (plan.state_dir / "store.json").write_text(  # store is named (tui.engine.moves)
        '{"url": "file://store", "ledger_stored": 100}')
    said = how_to_continue(plan)
    assert "price-per-hour" not in said and "window-hours" not in said
    command = re.match(r"`([^`]+)`", said).group(1)
    words = shlex.split(command)
    env = words.pop(0)
    assert env == "ITERA_STORE_ENDPOINT=http://127.0.0.1:9" and words[:2] == ["itera-tui",
                                                                              "resume"]
    assert main([w if w != "DIR" else str(tmp_path / "new") for w in words[1:]]) == 2
    assert "caught by the test" in capsys.readouterr().err
    lot = plan.lots[0]
    assert rentals == [resume_mod.Rental(lot.hours, lot.price_usd, lot.gpu)]


@pytest.mark.parametrize("doc", ["docs/away.md", "docs/commands.md"])
def test_the_resume_lines_the_docs_print_are_taken_as_pasted(doc, rentals, capsys):
    """Every `itera-tui resume URL ... --lot ...` the docs show, as a shell splits it."""
    from pathlib import Path

    text = (Path(__file__).parent.parent / doc).read_text()
    lines = [m.group(1) for m in re.finditer(r"^(itera-tui resume s3://\S+ .*)$", text, re.M)]
    lines += [f"itera-tui resume s3://b/p . --lot {m.group(1)}"
              for m in re.finditer(r"`--lot ('[^']*')`", text)]
    assert lines
    for line in lines:
        assert main(shlex.split(line)[1:]) == 2, capsys.readouterr().err
    assert rentals == [resume_mod.Rental(72.0, 47.14, "RTX 4090")] * len(lines)


def test_a_watched_checkpoint_stored_as_its_held_copy_is_continued_from(tmp_path):
    """A watched file (nanoGPT's out/ckpt.pt) reaches the store as the engine's held copy
    (`.itera-held/<tag>/ckpt.pt`) and is laid back there: resume continues from it, where
    it said "starts over" because it looked for the script's own path only."""
    import hashlib
    from types import SimpleNamespace as NS

    from tui.service.resume import ResumeRefused, _check_checkpoints

    rid, held = "control-1", ".itera-held/w-0123/ckpt.pt"
    copy = tmp_path / ".itera" / "runs" / rid / held
    copy.parent.mkdir(parents=True)
    copy.write_bytes(b"iteration 50")
    sha = hashlib.sha256(b"iteration 50").hexdigest()
    run = NS(id=rid, state="cut",
             checkpoints=[NS(path="out/ckpt.pt", digest=None, sha256=sha)],
             verified=[NS(path="out/ckpt.pt", ok=True, held=held)])
    cut = _check_checkpoints(tmp_path / ".itera", NS(runs=[run]),
                             {f".itera/runs/{rid}/{held}"})
    assert cut == {rid: "out/ckpt.pt"}
    copy.write_bytes(b"iteration 300")  # not the bytes acknowledged: refused, named
    with pytest.raises(ResumeRefused, match="ckpt.pt in the store differs"):
        _check_checkpoints(tmp_path / ".itera", NS(runs=[run]), {f".itera/runs/{rid}/{held}"})
