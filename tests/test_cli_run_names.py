"""`itera-tui checkpoint|stop RUN` take the name a person has (issue 36, item 11).

`itera-tui checkpoint control` answered "no run 'control'", exit 1. A run id,
the room's label (`control·run`, `control·pilot`, `control·run#2`) or a variant
id with one running run is accepted; otherwise the valid ids are listed and
the exit status is 2 (bad input), as for every other typo.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import run_cli
from servicekit import end_engine, wait_until
from test_app_support import campaign, events_of


def _state(*runs):
    return SimpleNamespace(runs=[SimpleNamespace(id=i, target=t, kind=k, attempt=a, state=s)
                                 for i, t, k, a, s in runs])


STATE = _state(("control-1a-p", "control", "pilot", 1, "completed"),
               ("control-1a-1", "control", "run", 1, "stopped"),
               ("control-1a-2", "control", "run", 2, "running"),
               ("wide-2b-p", "wide", "pilot", 1, "completed"),
               ("wide-2b-1", "wide", "run", 1, "completed"))


def test_ids_labels_and_variants_resolve_where_unambiguous():
    from tui.service.commands import resolve_run

    assert resolve_run(STATE, "control-1a-1") == ("control-1a-1", None)
    assert resolve_run(STATE, "control·run#2") == ("control-1a-2", None)
    assert resolve_run(STATE, "control.pilot") == ("control-1a-p", None)
    assert resolve_run(STATE, "control") == ("control-1a-2", None)  # the one running
    rid, problem = resolve_run(STATE, "wide")  # a pilot and a run, none running
    assert rid is None and "more than one run 'wide'" in problem
    assert "wide-2b-p (wide·pilot, completed)" in problem and "wide-2b-1 (wide·run" in problem
    rid, problem = resolve_run(STATE, "nope")
    assert rid is None and problem.startswith("no run 'nope': give one of control-1a-2 ")


@pytest.mark.slow
def test_checkpoint_takes_the_variant_or_the_room_s_name_and_exit_2_lists_ids(tmp_path):
    long = ["--steps", "100000", "--sleep", "0.05", "--jsonl"]
    path = campaign(tmp_path, [("control", "mandatory", long)])
    try:
        assert run_cli("engine", "start", str(path), cwd=tmp_path).returncode == 0
        wait_until(lambda: events_of(path, "run_launched"), 60, "the launch")
        rid = events_of(path, "run_launched")[0]["run"]
        for name in ("control", "control·run", rid):
            asked = run_cli("checkpoint", name, cwd=tmp_path)
            assert asked.returncode == 0, (name, asked.stderr)
            assert f"checkpoint requested for {rid}" in asked.stdout
        typo = run_cli("checkpoint", "contrl", cwd=tmp_path)
        assert typo.returncode == 2, typo.stderr
        assert f"no run 'contrl': give one of {rid} (control·run, running)" in typo.stderr
    finally:
        end_engine(tmp_path)
