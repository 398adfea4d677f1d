"""A store the campaign cannot write to is refused before anything is spent (issue 40
item 5): `check` exits 2 with one sentence that says what to create or set, and so do
`run --headless` and `engine start` before any run launches; `--without-store` starts
it all the same, with no mirror, and the advice after the box's end never names a store
that holds nothing of the campaign.

Fast tier: a `file://` store (its folder's parent missing, or a file), and S3 on an
endpoint whose port is closed (refused inside botocore: no server). Slow tier: moto's
S3 (tests/storekit.py) with a bucket that does not exist and a wrong endpoint port,
and one real headless run with `--without-store`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import needs
from enginekit import printer_cmd, write_plan
from storekit import free_port, s3  # noqa: F401  (s3: the fixture, moto's server)

from tui.cli import main

GO_ON = "itera-tui run --without-store"


def plan_with_store(root: Path, url: str, options: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    return write_plan(root, f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--steps", "3")}
minutes = 1
""", extra=f'\n[store]\nurl = "{url}"\n' + (f"options = {{ {options} }}\n" if options else ""))


def refused_with(capsys, argv: list[str], *words: str) -> str:
    """`argv` exits 2 with one line on stderr naming the store, `words` and the way on."""
    assert main(argv) == 2
    said = capsys.readouterr()
    lines = [line for line in said.err.splitlines() if line.strip()]
    assert len(lines) == 1, said.err
    for word in (*words, GO_ON):
        assert word in lines[0], said.err
    assert "Traceback" not in said.err + said.out and "fits" not in said.out
    return lines[0]


def nothing_started(root: Path) -> None:
    state = root / ".itera"
    assert not (state / "ledger.jsonl").exists() and not (state / "plan.toml").exists()
    assert not (root / "runs").exists() or not any((root / "runs").iterdir())


FILE_CASES = {
    "parent missing": (lambda tmp: f"file://{tmp}/nomount/volume/store",
                       "no such folder here", "does not exist"),
    "parent a file": (lambda tmp: f"file://{tmp}/afile/store",
                      "no such folder here", "is not a folder here"),
}


@pytest.mark.parametrize("case", sorted(FILE_CASES))
@pytest.mark.parametrize("command", ["check", "run --headless", "engine start"])
def test_a_file_store_that_cannot_be_written_is_refused_before_anything_starts(
        tmp_path, capsys, case, command):
    (tmp_path / "afile").write_text("not a folder")
    url_of, *words = FILE_CASES[case]
    url = url_of(tmp_path)
    path = plan_with_store(tmp_path / "camp", url)
    argv = {"check": ["check", str(path)], "run --headless": ["run", "--headless", str(path)],
            "engine start": ["engine", "start", str(path)]}[command]
    line = refused_with(capsys, argv, f"{url}: ", *words, "create it")
    assert "mount" in line
    nothing_started(tmp_path / "camp")
    assert not (tmp_path / "nomount").exists()  # never made on the box's own disk


def test_a_file_store_that_works_is_not_refused(tmp_path, capsys):
    (tmp_path / "vol").mkdir()
    path = plan_with_store(tmp_path / "camp", f"file://{tmp_path}/vol/store")
    assert main(["check", str(path)]) == 0, capsys.readouterr().err
    assert not [p for p in (tmp_path / "vol").rglob("*") if p.is_file()]  # probe removed


def test_an_s3_endpoint_that_refuses_is_named_at_check(tmp_path, capsys, monkeypatch):
    pytest.importorskip("s3fs")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    path = plan_with_store(tmp_path / "camp", "s3://camp/team",
                           'endpoint_url = "http://127.0.0.1:1"')
    refused_with(capsys, ["check", str(path)], "s3://camp/team: ",
                 "cannot be reached at its endpoint http://127.0.0.1:1")
    refused_with(capsys, ["run", "--headless", str(path)], "cannot be reached")
    nothing_started(tmp_path / "camp")


def test_a_store_that_does_not_answer_is_refused_within_the_wait(tmp_path, monkeypatch):
    """A store that hangs: `check` waits CHECK_WAIT_S at most, then refuses in words."""
    import threading

    from tui.campaign import load_plan
    from tui.store import claim

    hang = threading.Event()
    monkeypatch.setattr(claim, "probe_write", lambda store, part: hang.wait(60))
    plan = load_plan(plan_with_store(tmp_path / "camp", f"file://{tmp_path}/store"),
                     check_files=False)
    try:
        (line,) = claim.store_refusal(plan, wait_s=0.5)
    finally:
        hang.set()
    assert "not answering within 0.5 s" in line and GO_ON in line


def test_without_store_is_kept_and_the_advice_names_no_empty_store(tmp_path, capsys):
    """`--without-store`: the start goes past the refusal (the choice kept for the
    engine), the session starts no mirror and says so, and what continues the campaign
    after its box's end never names the store; a store its mirror never wrote is not
    named either, one that holds its ledger is."""
    from tui.campaign import load_plan
    from tui.engine.moves import how_to_continue
    from tui.session import CampaignSession
    from tui.store.claim import refuse_unusable_store, without_store

    url = f"file://{tmp_path}/nomount/store"
    plan = load_plan(plan_with_store(tmp_path / "camp", url), check_files=False)
    assert "itera-tui resume" not in how_to_continue(plan)  # nothing stored: never named
    (plan.state_dir).mkdir(parents=True, exist_ok=True)
    (plan.state_dir / "store.json").write_text(json.dumps({"url": url, "ledger_stored": 10}))
    assert "itera-tui resume" in how_to_continue(plan)
    refuse_unusable_store(plan, go_without=True)
    assert without_store(plan.state_dir)
    said = how_to_continue(plan)
    assert "itera-tui resume" not in said and "--without-store" in said, said
    session = CampaignSession(plan)
    with session:
        assert session.mirror is None
        warnings = [w.message for w in session.engine.state.warnings]
    assert any("not used: started with --without-store" in w for w in warnings), warnings
    assert not (tmp_path / "nomount").exists()


# -- on a real S3 API (moto) -------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.parametrize("case", ["no such bucket", "wrong endpoint port"])
def test_an_s3_store_that_cannot_be_written_is_refused_at_check_and_start(
        s3, tmp_path, capsys, case):
    pytest.importorskip("s3fs")
    s3.make_bucket("camp")
    bucket, endpoint, words = {
        "no such bucket": ("nobucket", s3.endpoint, ("no such bucket", "create the bucket")),
        "wrong endpoint port": ("camp", f"http://127.0.0.1:{free_port()}",
                                ("cannot be reached at its endpoint",))}[case]
    path = plan_with_store(tmp_path / "camp", f"s3://{bucket}/team",
                           f'endpoint_url = "{endpoint}"')
    refused_with(capsys, ["check", str(path)], f"s3://{bucket}/team: ", *words)
    refused_with(capsys, ["run", "--headless", str(path)], f"s3://{bucket}/team: ", *words)
    nothing_started(tmp_path / "camp")


@pytest.mark.slow
@needs("s3fs")
def test_without_store_runs_and_says_it_has_no_store(s3, tmp_path, capsys):
    """The bucket does not exist; `run --headless --without-store` runs the campaign to
    its end with no mirror, says so, and stores nothing."""
    path = plan_with_store(tmp_path / "camp", "s3://nobucket/team",
                           f'endpoint_url = "{s3.endpoint}"')
    assert main(["run", "--headless", "--without-store", "--no-wrapup", str(path)]) in (0, 4)
    out = capsys.readouterr().out
    assert "run_launched" in (tmp_path / "camp/.itera/ledger.jsonl").read_text()
    assert "not used: started with --without-store" in out, out
    assert "store_object" not in (tmp_path / "camp/.itera/ledger.jsonl").read_text()
    assert not (tmp_path / "camp/.itera/store.json").exists()
    assert "nobucket" not in s3.fs().ls("")
