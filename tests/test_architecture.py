"""ARCHITECTURE.md says true things about the code it maps."""

from __future__ import annotations

from architecture_tables import REPO, tables, written


def test_the_module_tables_are_the_code_s_own():
    doc = (REPO / "ARCHITECTURE.md").read_text()
    assert written(doc) == tables(), (
        "ARCHITECTURE.md's module tables differ from the code: run "
        "`python tests/architecture_tables.py --write`")


def test_each_section_is_written_once():
    headings = [line for line in (REPO / "ARCHITECTURE.md").read_text().splitlines()
                if line.startswith("#")]
    assert len(headings) == len(set(headings)), sorted(
        h for h in headings if headings.count(h) > 1)
