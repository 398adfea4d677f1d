"""RELOAD.md's words a reader acts on (fast: rendered, not run; the slow
test_bundle_reload_torch_only installs exactly PIP_INSTALL and runs the snippet)."""

from __future__ import annotations

import re
from pathlib import Path

from tui.bundle.reloaddoc import PIP_INSTALL, render


def test_reload_md_names_numpy_so_torch_does_not_warn(tmp_path):
    """Issue 44, item 8: with `pip install torch` alone, torch's import prints "Failed to
    initialize NumPy"; RELOAD.md's install line has the reader install numpy too."""
    text = render(tmp_path, [])
    (install,) = re.findall(r"`(pip install torch[^`]*)`", text)
    assert install == PIP_INSTALL
    assert "numpy" in install.split()


def test_the_snippet_writes_no_bytecode_into_the_bundle(tmp_path):
    """Issue 44, item 1 (the slow test runs it): the snippet's first statements turn
    Python's bytecode cache off before anything from code/ is imported."""
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    text = render(tmp_path, [{"id": "r1", "variant": "control", "artifacts": ["runs/r1/m.pt"]}])
    (block,) = re.findall(r"```python\n(.*?)```", text, re.S)
    statements = [line for line in block.splitlines() if line and not line.startswith("#")]
    assert statements[:2] == ["import sys", "sys.dont_write_bytecode = True  # importing "
                              "code/ leaves no __pycache__ in the bundle (`itera-tui verify "
                              ".` stays true)"]
    compile(block, "reload.py", "exec")


def test_the_verifier_never_reads_a_bytecode_cache_left_in_the_bundle(tmp_path):
    """Issue 44, item 1: verify names `code/**/__pycache__` as extra, not a failure, so
    the verifier must not run it in place of the checked source: a cache planted to
    match the source's size and mtime (what Python checks) is never read."""
    import importlib._bootstrap_external as external
    import importlib.util
    import os
    import sys

    from tui.training import pickled

    code = tmp_path / "code"
    code.mkdir()
    name = "itera_issue44_model"
    source = code / f"{name}.py"
    source.write_text("class Net:\n    planted = False\n")
    marker = tmp_path / "planted-ran"
    st = source.stat()
    evil = compile(f"open({str(marker)!r}, 'w').close()\nclass Net:\n    planted = True\n",
                   str(source), "exec")
    cached = Path(importlib.util.cache_from_source(str(source)))
    cached.parent.mkdir()
    cached.write_bytes(external._code_to_timestamp_pyc(evil, int(st.st_mtime), st.st_size))
    before = list(sys.path)
    try:
        net = pickled._resolve_campaign(f"{name}.Net", code)
    finally:
        sys.path[:] = before
        sys.modules.pop(name, None)
    assert not marker.exists(), "the planted bytecode ran"
    assert net is not None and net.planted is False
    assert os.listdir(cached.parent) == [cached.name]  # nothing written beside it either


def test_reload_md_says_where_the_corpus_is_to_redo_the_predictions(tmp_path):
    """The newcomer walk, round 6: RELOAD.md asked for the corpus `plan.toml` pins, "in a
    folder `corpus/` here", without saying the bundle does not hold it nor where it is:
    a reader with the bundle alone looked for it in vain. It names the plan's folder on
    the box and the copy; never an absolute path (a machine path stays out)."""
    (tmp_path / "runs" / "r1").mkdir(parents=True)
    runs = [{"id": "r1", "variant": "control", "artifacts": ["runs/r1/model.pt"]}]
    code = {"modules": ["code/m.py"],
            "rebuild": {"runs/r1/model.pt": {"builder": "m:from_meta", "predict": "m:predictions"}}}
    text = render(tmp_path, runs, code, "tui/demo/data")
    assert "the bundle does not hold them" in text
    assert "rsync -avP '<user>@<box>:<campaign-dir>/tui/demo/data/' corpus/" in text, text
    outside = render(tmp_path, runs, code, "/srv/corpora/topic")
    assert "/srv/corpora" not in outside and "`[corpus] root` names" in outside
