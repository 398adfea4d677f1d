"""A run cut on a box the campaign moved away from, with nothing of it in the store
(killed before its first verified checkpoint), has no folder in the resumed campaign's
bundle: the manifest says so (`left_behind`), and the check does not fail the bundle
for it ("FAIL runs/control-…-1: expected run … is missing"). Any other run named and
missing still fails. Issue 40, item 2. In-process: a bundle built by hand, no reload."""

from __future__ import annotations

import hashlib
import json

from tui.bundle.bundle_check import verify_bundle


def test_a_run_left_behind_on_a_gone_box_is_not_expected_but_any_other_still_is(tmp_path):
    (tmp_path / "runs/b-1").mkdir(parents=True)
    data = b'{"step": 1}\n'
    (tmp_path / "runs/b-1/metrics.jsonl").write_bytes(data)
    manifest = {"files": [{"path": "runs/b-1/metrics.jsonl", "bytes": len(data),
                           "sha256": hashlib.sha256(data).hexdigest(), "kind": "metrics",
                           "run": "b-1"}],
                "runs": [{"id": "a-1", "left_behind": "cut when its box went away; nothing "
                          "of it reached the store"}, {"id": "b-1"}, {"id": "c-1"}]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    failed = {f["path"] for f in verify_bundle(tmp_path, reload=False).failures}
    assert "runs/c-1" in failed  # named, missing, and nothing says why
    assert "runs/a-1" not in failed, failed


def test_the_wrapup_names_a_cut_run_of_a_gone_box_that_left_nothing(tmp_path):
    from test_lost_work import campaign, resumed
    from tui.bundle.paths import Scrubber
    from tui.bundle.runfiles import copy_run
    from tui.bundle.stage import Stager
    from tui.engine.ledger.events import parse
    from tui.engine.ledger.state import replay

    plan = campaign(tmp_path, resumed(first_step=0))
    state = replay([parse(e) for e in resumed(first_step=0)])
    stager = Stager(tmp_path / "staging", Scrubber(tmp_path))
    runs = tmp_path / ".itera/runs"
    gone = copy_run(plan, state.run("c1"), runs / "c1", stager, lambda _: None)
    assert gone.left_behind and "nothing of it reached the store" in gone.left_behind
    (runs / "c2").mkdir(parents=True)  # its continuation ran here: it has its folder
    (runs / "c2/stdout.log").write_text("step 1\n")
    assert copy_run(plan, state.run("c2"), runs / "c2", stager, lambda _: None).left_behind \
        is None
    (runs / "c1/checkpoints").mkdir(parents=True)  # laid back from the store: kept, named
    (runs / "c1/stdout.log").write_text("step 1\n")
    assert copy_run(plan, state.run("c1"), runs / "c1", stager, lambda _: None).left_behind \
        is None
