"""A deliverable is a regular file inside its run directory; anything else is named, never
accepted.

Before: a run that left `model.pt` as a symbolic link (to a file outside its run
directory) counted as accepted ("1 accepted"), the bundle verified, and
`model.pt` was not in it. Now the link is refused by name in the bundle and
the run is not accepted, with the reason `status`, the room and the report share.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from clikit import cli
from conftest import run_cli
from enginekit import write_plan
from tui.engine.conclusion.outcome import LINK, deliverable_problem


def _variant(vid: str, category: str, shell: str) -> str:
    return (f'[[variant]]\nid = "{vid}"\ncategory = "{category}"\n'
            f'command = {json.dumps(["sh", "-c", shell])}\nminutes = 1\n')


def test_a_deliverable_must_be_a_regular_file_reached_through_no_link(tmp_path):
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    (run / "real.pt").write_bytes(b"weights")
    (run / "eval" / "preds.jsonl").write_text("{}\n")
    (run / "empty.pt").write_bytes(b"")
    (run / "inside.pt").symlink_to("real.pt")  # even a link that stays inside
    (run / "out.pt").symlink_to(tmp_path / "elsewhere.pt")
    (tmp_path / "elsewhere.pt").write_bytes(b"weights")
    (run / "linked").symlink_to(run / "eval")
    (run / "folder.pt").mkdir()
    os.mkfifo(run / "fifo.pt")
    assert deliverable_problem(run, "real.pt") is None
    assert deliverable_problem(run, "eval/preds.jsonl") is None
    assert deliverable_problem(run, "empty.pt") == "empty"
    assert deliverable_problem(run, "absent.pt") == "missing"
    assert deliverable_problem(run, "inside.pt") == LINK
    assert deliverable_problem(run, "out.pt") == LINK
    assert deliverable_problem(run, "linked/preds.jsonl") == LINK  # a linked folder too
    assert deliverable_problem(run, "folder.pt") == "not a regular file"
    assert deliverable_problem(run, "fifo.pt") == "not a regular file"
    assert deliverable_problem(run, "../real.pt") == "not a path inside the run directory"


@pytest.mark.slow
def test_a_symlinked_deliverable_is_named_and_not_accepted_end_to_end(tmp_path):
    variants = _variant("control", "mandatory",
                        "python3 scripts/printer.py --steps 5 --sleep 0.01 --write model.txt")
    variants += _variant("wide", "useful", "python3 scripts/printer.py --steps 5 --sleep 0.01"
                         " && ln -s ../../../weights.txt \"$ITERA_RUN_DIR/model.txt\"")
    path = write_plan(tmp_path, variants, extra='[deliverables]\nfiles = ["model.txt"]\n')
    (tmp_path / "weights.txt").write_text("not this run's output\n")
    run_cli("run", "--headless", str(path), cwd=tmp_path, timeout=240)

    status = json.loads(cli("status", "--json", str(path), cwd=tmp_path).stdout)
    budget = status["budget"]
    assert [c.split(":")[0] for c in budget["accepted_configs"]] == ["control"], budget
    rejected = json.dumps(budget)
    assert "model.txt (a symbolic link" in rejected, rejected

    bundle = tmp_path / "outputs" / "bundle"
    manifest = json.loads((bundle / "manifest.json").read_text())
    [wide] = [r for r in manifest["runs"] if r["variant"] == "wide"]
    assert {"path": "model.txt", "reason": "a deliverable that is a symbolic link: not "
            "bundled, not accepted"} in wide["refused"]
    assert not list(bundle.glob("runs/wide-*/model.txt"))
    assert list(bundle.glob("runs/control-*/model.txt"))  # a regular one is bundled
    report = (bundle / "report.md").read_text()
    assert "`model.txt`: a deliverable that is a symbolic link" in report
    assert "model.txt (a symbolic link" in report  # why wide is not accepted
