"""The README a newcomer reads in five minutes, and the reference in docs/ that stays true.

What it holds the docs to: the README keeps CI's test command verbatim and stays short;
its picture is the room the snapshot tests draw from the real app; the docs build with
`mkdocs build --strict` (a broken link or anchor fails); and every `campaign.toml`
example in README.md and docs/ passes `itera-tui check`, a whole file as it stands, a
fragment (a `[metrics]` table, a `[[step]]`) merged into the README's minimal campaign.
`itera-tui init` (issue 36 item 16) is tested here too: it writes what the README shows.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import tomli_w

from conftest import REPO, needs

README = REPO / "README.md"
DOCS = REPO / "docs"
CI_TEST_LINE = "pip install torch==2.13.0 -e '.[test]' && python -m pytest -q -n 3"
ROOM_SNAPSHOT = REPO / "tests" / "__snapshots__" / "test_app_snapshots" / \
    "test_main_screen_80x24.svg"
README_MAX_LINES = 150  # five minutes of reading; the reference lives in docs/


def _markdown_files() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def _toml_examples() -> list[tuple[str, int, str]]:
    """(file, index, text) of every ```toml block in README.md and docs/*.md."""
    found = []
    for path in _markdown_files():
        blocks = re.findall(r"^```toml\n(.*?)^```", path.read_text(), flags=re.S | re.M)
        found += [(path.relative_to(REPO).as_posix(), i, b) for i, b in enumerate(blocks)]
    return found


def _merged(base: dict, fragment: dict) -> dict:
    """`fragment` laid over `base`: an array of tables grows, a table is updated."""
    out = dict(base)
    for key, value in fragment.items():
        if isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = out[key] + value
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = {**out[key], **value}
        else:
            out[key] = value
    return out


def _readme_campaign() -> str:
    whole = [text for file, _, text in _toml_examples()
             if file == "README.md" and "[campaign]" in text]
    assert len(whole) == 1, "the README shows one minimal campaign.toml"
    return whole[0]


def _check(folder: Path, capsys, *flags: str) -> tuple[int, str]:
    """`itera-tui check` on folder/campaign.toml, in this process (it loads no torch)."""
    from tui.cli import main

    cwd = os.getcwd()
    os.chdir(folder)
    try:
        code = main(["check", *flags, "campaign.toml"])
    finally:
        os.chdir(cwd)
    out = capsys.readouterr()
    return code, out.out + out.err


def test_the_readme_keeps_the_ci_test_command_verbatim_and_is_short():
    text = README.read_text()
    assert CI_TEST_LINE in text  # CI runs the README's test command (.ci/run)
    assert CI_TEST_LINE in (REPO / ".ci" / "run").read_text()
    assert "pip install torch==2.13.0 -e . && itera-tui" in text
    lines = text.count("\n")
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move reference to docs/"
    assert "~1.5 min" not in text  # a time is given as measured on a named box, or not at all


def test_every_page_the_readme_links_exists_and_the_nav_holds_every_page():
    text = README.read_text()
    for target in re.findall(r"\]\(((?:docs/)[^)#]+)", text):
        assert (REPO / target).is_file(), target
    nav = (REPO / "mkdocs.yml").read_text()
    for page in DOCS.glob("*.md"):
        assert f": {page.name}" in nav, f"{page.name} is not in mkdocs.yml's nav"


def test_the_readme_picture_is_the_room_the_snapshot_tests_draw():
    """docs/img/room.svg is byte for byte the 80x24 snapshot of the real app
    (tests/test_app_snapshots.py::test_main_screen_80x24 compares that one with what the
    room draws). After a wanted visual change: pytest --snapshot-update, then
    cp tests/__snapshots__/test_app_snapshots/test_main_screen_80x24.svg docs/img/room.svg"""
    picture = DOCS / "img" / "room.svg"
    assert "](docs/img/room.svg)" in README.read_text()
    assert picture.read_bytes() == ROOM_SNAPSHOT.read_bytes(), (
        "docs/img/room.svg differs from the room's 80x24 snapshot: copy it over")
    root = ET.parse(picture).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    said = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    for word in ("left", "slack", "control·run", "checkpoint"):  # the room, not a stand-in
        assert word in said.replace("\xa0", " "), word


@pytest.mark.slow
@needs("mkdocs", "material")
def test_the_docs_build_with_mkdocs_strict(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d",
                           str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True,
                          timeout=240, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "site" / "campaign" / "index.html").is_file()
    page = (tmp_path / "site" / "index.html").read_text()
    assert "img/room.svg" in page
    commands = (tmp_path / "site" / "commands" / "index.html").read_text()
    assert "decide continue|drop:ID[,ID]|wrapup" in commands  # GitHub's `\|`, read as `|`


EXAMPLES = _toml_examples()


@pytest.mark.parametrize("file,index,text", EXAMPLES,
                         ids=[f"{file}#{index}" for file, index, _ in EXAMPLES])
def test_every_campaign_toml_example_passes_check(file, index, text, tmp_path, capsys):
    from tui.demo.scaffold import write

    write(tmp_path)  # the template's train.py: the script the README's campaign runs
    if "[campaign]" in text:
        plan = text
    else:
        plan = tomli_w.dumps(_merged(tomllib.loads(_readme_campaign()), tomllib.loads(text)))
    (tmp_path / "campaign.toml").write_text(plan)
    # a [store] of the docs (s3://bucket/prefix, a profile "team") is nobody's: the plan is
    # checked as `run --without-store` would start it; tests/test_store_unusable.py asks
    # real stores
    code, said = _check(tmp_path, capsys, "--without-store")
    assert code == 0, f"{file} example {index}:\n{plan}\n{said}"


def test_the_docs_hold_campaign_examples_to_check():
    files = {file for file, _, _ in EXAMPLES}
    assert "README.md" in files and len(EXAMPLES) >= 3  # the collection found them


@pytest.mark.parametrize("demo", [False, True], ids=["template", "demo"])
def test_init_writes_a_campaign_that_check_accepts_in_an_empty_folder(demo, tmp_path, capsys):
    from tui.cli import main

    folder = tmp_path / "new campaign"
    assert main(["init", *(["--demo"] if demo else []), str(folder)]) == 0
    said = capsys.readouterr().out
    assert "itera-tui check" in said
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert names == (["campaign.toml", "data/train.jsonl", "data/val.jsonl"] if demo
                     else ["campaign.toml", "train.py"])
    code, report = _check(folder, capsys)  # the pinned corpus checked by its hashes too
    assert code == 0, report
    assert "fits" in report


def test_init_never_overwrites_and_says_so(tmp_path, capsys):
    from tui.cli import main

    (tmp_path / "campaign.toml").write_text("# mine\n")
    assert main(["init", str(tmp_path)]) == 2
    assert "already exists" in capsys.readouterr().err
    assert (tmp_path / "campaign.toml").read_text() == "# mine\n"
    assert not (tmp_path / "train.py").exists()  # nothing written


def test_the_template_is_the_readme_campaign_with_its_comments():
    """The README's minimal campaign is the template `init` writes, less what has a
    default: the same question, metric, lot and variants' commands."""
    template = tomllib.loads((REPO / "tui" / "demo" / "template" / "campaign.toml").read_text())
    readme = tomllib.loads(_readme_campaign())
    assert readme["campaign"] == template["campaign"]
    assert [v["command"] for v in readme["variant"]] == \
        [v["command"] for v in template["variant"]]
    assert readme["deliverables"] == template["deliverables"]


def test_the_packaged_demo_is_the_repository_demo_with_its_corpus_beside_it():
    """tui/demo/campaign.toml (what a wheel carries) may differ from the repository's
    campaign.toml only where its corpus is: `data/` and `--data data`."""
    root = tomllib.loads((REPO / "campaign.toml").read_text())
    packaged = tomllib.loads((REPO / "tui" / "demo" / "campaign.toml").read_text())

    def normal(plan):
        text = tomli_w.dumps(plan).replace('"--data", "data", ', "")
        return tomllib.loads(text.replace("tui/demo/data", "data"))

    for v in packaged["variant"]:
        assert v["command"][3:5] == ["--data", "data"], v["id"]
        v["command"][3:5] = []
    for s in packaged["step"]:
        if "--data" in s["command"]:
            i = s["command"].index("--data")
            del s["command"][i:i + 2]
    assert normal(packaged) == normal(root)


def test_the_no_such_file_error_and_the_help_name_init(tmp_path, capsys):
    from tui.cli import main

    assert main(["check", str(tmp_path / "campaign.toml")]) == 2
    assert "itera-tui init" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "itera-tui init" in capsys.readouterr().out


def test_every_command_and_option_of_the_cli_has_its_row_in_the_commands_page():
    """docs/commands.md is the CLI in words: each subcommand has a row whose first cell
    names it, and every long option its parser takes is in that cell."""
    from tui.cli import SUBCOMMANDS, _parsers

    rows = [line.split(" | ")[0] for line in (DOCS / "commands.md").read_text().splitlines()
            if line.startswith("| `itera-tui")]
    parsers = _parsers()
    assert set(SUBCOMMANDS) <= set(parsers)
    for name, parser in parsers.items():
        head = "`itera-tui [PATH]" if name == "app" else f"`itera-tui {name}"
        cells = [cell for cell in rows if head in cell]
        assert cells, f"docs/commands.md has no row for itera-tui {name}"
        options = {o for a in parser._actions for o in a.option_strings
                   if o.startswith("--") and o != "--help"}
        missing = sorted(o for o in options if not any(o in cell for cell in cells))
        assert not missing, f"itera-tui {name}: {missing} not in docs/commands.md"


def test_every_itera_tui_command_in_a_shell_block_is_one_the_cli_takes():
    """A command the README or docs/ tell a person to type parses as the CLI reads it
    (the same subcommand and options), so none is misspelt or out of date."""
    import shlex

    from tui.cli import SUBCOMMANDS, _parsers

    parsers, seen = _parsers(), 0
    for path in _markdown_files():
        for block in re.findall(r"^```sh\n(.*?)^```", path.read_text(), flags=re.S | re.M):
            for line in block.splitlines():
                for part in line.split("#", 1)[0].split("&&"):
                    words = shlex.split(part)
                    if not words or words[0] != "itera-tui":
                        continue
                    rest = words[1:]
                    name = rest[0] if rest and rest[0] in SUBCOMMANDS else "app"
                    args = rest[1:] if name != "app" else rest
                    exact = {o for a in parsers[name]._actions for o in a.option_strings}
                    typed = {w.split("=", 1)[0] for w in args if w.startswith("--")}
                    assert typed <= exact, (path.name, part, typed - exact)  # no abbreviation
                    try:
                        parsers[name].parse_intermixed_args(args)
                    except SystemExit:
                        pytest.fail(f"{path.name}: `{part.strip()}` is not a command the CLI "
                                    "takes")
                    seen += 1
    assert seen >= 6
