"""The store's URLs as a person types them after reading the docs (issue 40 item 4):
the part's own URL (`itera-tui resume s3://bucket/prefix/lot1 .`, docs/away.md) is a
store and its part, as the store's root with `--part` is; and a store that cannot be
reached or read is one sentence naming it and the option that fixes it, exit 2, never
a botocore traceback.

Fast tier: a `file://` store; the S3 cases fail inside botocore before any socket is
answered (no credentials; an endpoint on a closed port), so no server is started.
"""

from __future__ import annotations

import pytest

from storekit import s3  # noqa: F401  (s3: the fixture, moto's server)

from tui.cli import main
from tui.store import StoreIndex

LOT = 'gpu = "cpu", hours = 1, price_usd = 1'


def stored_part(tmp_path):
    """A store whose part `cpu` holds an index and nothing else: resume gets as far as
    reading the part, then refuses (its plan is not there), starting nothing."""
    part = tmp_path / "store" / "prefix" / "cpu"
    part.mkdir(parents=True)
    (part / "index.json").write_text(StoreIndex(part="cpu").to_json())
    return f"file://{tmp_path}/store/prefix"


@pytest.mark.parametrize("how", ["root", "part URL", "part URL with --part", "--part"])
def test_the_part_url_the_docs_print_is_the_store_and_its_part(tmp_path, capsys, how):
    root = stored_part(tmp_path)
    url, extra = {"root": (root, []), "part URL": (f"{root}/cpu", []),
                  "part URL with --part": (f"{root}/cpu", ["--part", "cpu"]),
                  "--part": (root, ["--part", "cpu"])}[how]
    assert main(["resume", url, str(tmp_path / "new"), "--lot", LOT, *extra]) == 2
    err = capsys.readouterr().err
    assert f"{root}/cpu/plan.toml: the frozen plan is not in the store" in err, err
    assert "no campaign stored there" not in err and not (tmp_path / "new/.itera").exists()


def test_a_store_url_with_nothing_stored_says_so(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert main(["resume", f"file://{tmp_path}/empty", str(tmp_path / "new"),
                 "--lot", LOT]) == 2
    assert "no campaign stored there" in capsys.readouterr().err
    assert main(["resume", f"file://{tmp_path}/absent", str(tmp_path / "new"),
                 "--lot", LOT]) == 2
    assert f"file://{tmp_path}/absent: no such folder here" in capsys.readouterr().err


S3_CASES = {  # environment -> what the one sentence must name
    "no credentials": ({}, "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
    "endpoint not answering": ({"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                                "ITERA_STORE_ENDPOINT": "http://127.0.0.1:1"},
                               "cannot be reached at its endpoint http://127.0.0.1:1: for "
                               "an S3 that is not AWS's, set ITERA_STORE_ENDPOINT="),
}


@pytest.mark.parametrize("command", ["resume", "verify", "fetch"])
@pytest.mark.parametrize("case", sorted(S3_CASES))
def test_a_store_that_cannot_be_read_is_one_sentence_naming_it_and_the_fix(
        tmp_path, capsys, monkeypatch, command, case):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_ENDPOINT_URL", "ITERA_STORE_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.aws of this machine's
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    env, fix = S3_CASES[case]
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    tail = {"resume": [str(tmp_path / "new"), "--lot", LOT], "verify": [],
            "fetch": [str(tmp_path / "copy")]}[command]
    assert main([command, "s3://camp/team/lot1", *tail]) == 2
    said = capsys.readouterr()
    lines = [line for line in said.err.splitlines() if "nothing was started" not in line]
    assert len(lines) == 1 and "s3://camp/team/lot1: " in lines[0] and fix in lines[0], \
        said.err
    assert "Traceback" not in said.err + said.out


@pytest.mark.slow
@pytest.mark.parametrize("command", ["resume", "verify", "fetch"])
def test_a_bucket_that_does_not_exist_is_named_with_what_to_create(s3, tmp_path, capsys,
                                                                   monkeypatch, command):
    """On a real S3 API (moto's server, tests/storekit.py): the bucket is missing."""
    pytest.importorskip("s3fs")
    monkeypatch.setenv("ITERA_STORE_ENDPOINT", s3.endpoint)
    tail = {"resume": [str(tmp_path / "new"), "--lot", LOT], "verify": [],
            "fetch": [str(tmp_path / "copy")]}[command]
    assert main([command, "s3://nobucket/team/lot1", *tail]) == 2
    said = capsys.readouterr()
    lines = [line for line in said.err.splitlines() if "nothing was started" not in line]
    assert len(lines) == 1 and "s3://nobucket/team/lot1: " in lines[0], said.err
    assert "create the bucket" in lines[0] or "no such bucket" in lines[0], said.err
    assert "Traceback" not in said.err + said.out
