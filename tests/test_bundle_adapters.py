"""RELOAD.md's adapter lines and the report's sentences, from hostile adapter configs.

What an adapter config says (its base, its revision) and what a run names its
folders are the run's text: they reach RELOAD.md's Python only as string
literals and the report only as one printable line. Stdlib only, no torch.
"""

import ast

import pytest

from tui.bundle.adapters import pin_text, reload_lines, report_lines

HOSTILE = 'x")\nimport os; os.system("touch pwned")\n#'


@pytest.mark.parametrize("pinned_by,revision", [
    ("adapter_config", HOSTILE), ("content_digest", "sha256:" + "0" * 64), (None, None)])
def test_hostile_text_stays_a_string_literal(pinned_by, revision):
    a = {"base": HOSTILE, "revision": revision, "pinned_by": pinned_by,
         "task_type": "CAUSAL_LM", "unpinned": None if revision else HOSTILE}
    src = "\n".join(reload_lines(f"runs/r/{HOSTILE}", a, "r_adapter"))
    tree = ast.parse(src)
    calls = {n.func.attr if isinstance(n.func, ast.Attribute) else n.func.id
             for n in ast.walk(tree) if isinstance(n, ast.Call)}
    assert "system" not in calls and not any(isinstance(n, ast.Import) for n in tree.body)
    assert [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value == HOSTILE]
    assert "\n" not in pin_text(a)


def test_the_report_names_the_pin_or_says_it_is_not_pinned():
    runs = [{"id": "c-1", "adapters": [
        {"path": "runs/c-1/adapter", "base": "org/tiny", "revision": "a" * 40,
         "pinned_by": "hub_cache", "unpinned": None, "loaded_on_base": True},
        {"path": "runs/c-1/adapter2", "base": "org/gone", "revision": None, "pinned_by": None,
         "unpinned": "org/gone is not in the local hub cache (HF_HUB_CACHE / HF_HOME)",
         "loaded_on_base": False, "load_note": "not loaded on its base: the base is not on "
                                               "this box"}]}]
    first, second, blank = report_lines(runs)
    assert first == ("Run `c-1`: adapter `runs/c-1/adapter`: base model `org/tiny` at revision "
                     f"`{'a' * 40}` (the commit of the snapshot the run loaded, from the local "
                     "hub cache); loaded onto its base in a fresh process.")
    assert second == ("Run `c-1`: adapter `runs/c-1/adapter2`: base model `org/gone`: revision "
                      "NOT pinned (org/gone is not in the local hub cache (HF_HUB_CACHE / "
                      "HF_HOME)); not loaded on its base: the base is not on this box.")
    assert blank == ""
