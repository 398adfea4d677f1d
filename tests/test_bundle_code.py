"""Which model code a bundle keeps: the modules an artifact's meta names, found as files.

Pure file reads (ast, no import): an SDK artifact's `builder` / `reload` hint and
`predict` name the modules that rebuild its model and redo its predictions;
the campaign's own are kept, and of itera-tui's own only the demo's.
"""

from __future__ import annotations

import json

from tui.bundle.code import PACKAGE_ROOT, artifact_entries, entry_point, modules_for


def test_entry_points_from_a_builder_or_the_reload_hint():
    assert entry_point("tui.demo.model:from_meta") == ("tui.demo.model", "from_meta")
    assert entry_point("tui.demo.model.from_meta(meta).load_state_dict(state_dict)") == \
        ("tui.demo.model", "from_meta")
    assert entry_point("rebuild it by hand") is None and entry_point(None) is None


def test_the_demo_modules_are_found_beside_the_package_with_what_they_import(tmp_path):
    found = modules_for(tmp_path, [], ["tui.demo.model", "tui.demo.predict"])
    assert set(found) == {"tui", "tui.demo", "tui.demo.model", "tui.demo.predict",
                          "tui.demo.dataset", "tui.demo.report"}  # torch: not a file here
    assert found["tui.demo.model"] == (PACKAGE_ROOT / "tui/demo/model.py", PACKAGE_ROOT)
    assert modules_for(tmp_path, [], ["tui.engine.ledger.file"]) == {}  # only the demo's own


def test_a_campaign_module_is_kept_from_the_campaign_folder_first(tmp_path):
    (tmp_path / "net.py").write_text("import torch\nfrom helpers import width\n")
    (tmp_path / "helpers.py").write_text("width = 3\n")
    found = modules_for(tmp_path, [], ["net"])
    assert found == {"net": (tmp_path / "net.py", tmp_path),
                     "helpers": (tmp_path / "helpers.py", tmp_path)}


def test_artifact_entries_read_the_sdk_sidecars_meta(tmp_path):
    (tmp_path / "runs/a").mkdir(parents=True)
    (tmp_path / "runs/a/model.pt.json").write_text(json.dumps({"meta": {
        "reload": "net.build(meta).load_state_dict(state_dict)", "predict": "net:predict"}}))
    (tmp_path / "runs/a/other.pt.json").write_text("{not json")
    assert artifact_entries(tmp_path, ["runs/a/model.pt", "runs/a/other.pt"]) == {
        "runs/a/model.pt": {"builder": ("net", "build"), "predict": ("net", "predict")}}
