"""Fuzz campaign files: random mutations of the demo campaign.toml never traceback.

Text-level cuts and splices and value-level type swaps, through the real
`itera-tui check` entry point in-process: every exit is 0 (a plan) or 2 (one
clear message per problem). Bounded examples: seconds.
"""

import contextlib
import io
import json
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import REPO
from tui.cli import main

DEMO = (REPO / "campaign.toml").read_text()
FUZZ = settings(max_examples=80, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])


def check_exit(text: str, where: Path) -> int:
    path = where / "campaign.toml"
    path.write_text(text, errors="surrogateescape")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        return main(["check", "--no-files", str(path)])


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


TOML_BITS = st.sampled_from(['"', "'", "=", "[", "]", "[[", "]]", "{", "}", ",", "\n", "#",
                             "-1", "0", "1e999", "nan", "inf", "true", "\\", "\0", "é", " "])


@FUZZ
@given(cuts=st.lists(st.tuples(st.integers(0, len(DEMO)), st.integers(0, 40),
                               st.lists(TOML_BITS, max_size=4).map("".join)),
                     min_size=1, max_size=4))
def test_campaign_text_mutations_exit_0_or_2(scratch, cuts):
    text = DEMO
    for at, length, insert in cuts:
        text = text[:at] + insert + text[at + length:]
    assert check_exit(text, scratch) in (0, 2)


PLAN = tomllib.loads(DEMO)


def key_paths(value, prefix=()):
    if isinstance(value, dict):
        for key, item in value.items():
            yield prefix + (key,)
            yield from key_paths(item, prefix + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield prefix + (i,)
            yield from key_paths(item, prefix + (i,))


PATHS = list(key_paths(PLAN))
TOML_VALUE = st.recursive(
    st.one_of(st.booleans(), st.integers(-2**63, 2**63 - 1), st.text(max_size=12),
              st.floats(allow_nan=True, allow_infinity=True)),
    lambda kids: st.one_of(st.lists(kids, max_size=3),
                           st.dictionaries(st.text(min_size=1, max_size=6), kids, max_size=3)),
    max_leaves=6)


@FUZZ
@given(changes=st.lists(st.tuples(st.sampled_from(PATHS), st.one_of(st.none(), TOML_VALUE)),
                        min_size=1, max_size=3))
def test_campaign_value_mutations_exit_0_or_2(scratch, changes):
    plan = json.loads(json.dumps(PLAN))  # a deep copy
    for path, value in changes:
        parent = plan
        try:
            for step in path[:-1]:
                parent = parent[step]
            if value is None:  # None: delete the key or item
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue
    try:
        text = tomli_w.dumps(plan)
    except (TypeError, ValueError):
        return  # not expressible in TOML: nothing a user could write
    assert check_exit(text, scratch) in (0, 2)


def test_the_demo_itself_checks(scratch):
    assert check_exit(DEMO, scratch) == 0
