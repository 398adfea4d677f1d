"""`outputs`, `.itera/` and the run directories may not be symbolic links out of the
campaign folder (a cloned campaign repo can ship `outputs -> /elsewhere`): `check`
says so, naming the link and where it points, and nothing is written there."""

import os
from pathlib import Path

from clikit import cli
from test_campaign_cli import GOOD


def campaign(tmp_path: Path) -> Path:
    root = tmp_path / "camp"
    root.mkdir()
    path = root / "campaign.toml"
    path.write_text(GOOD)
    return path


def refused(path: Path, *needles: str) -> None:
    done = cli("check", str(path), "--no-files")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    for needle in needles:
        assert needle in done.stderr, done.stderr


def test_an_outputs_link_out_of_the_folder_is_refused_at_check(tmp_path):
    path = campaign(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, path.parent / "outputs")
    refused(path, "campaign.outputs", '"outputs" is a symbolic link out of the campaign folder',
            str(elsewhere))
    done = cli("run", "--headless", str(path))
    assert done.returncode == 2 and "symbolic link" in done.stderr
    assert list(elsewhere.iterdir()) == []  # nothing was written there


def test_a_state_folder_or_run_directory_link_out_is_refused(tmp_path):
    path = campaign(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, path.parent / ".itera")
    refused(path, '".itera" is a symbolic link out of the campaign folder')
    (path.parent / ".itera").unlink()
    (path.parent / ".itera" / "runs").mkdir(parents=True)
    os.symlink(elsewhere, path.parent / ".itera" / "runs" / "control-run-1")
    refused(path, '".itera/runs/control-run-1"', "a run directory")


def test_a_link_that_stays_inside_the_folder_is_fine(tmp_path):
    path = campaign(tmp_path)
    (path.parent / "real-out").mkdir()
    os.symlink("real-out", path.parent / "outputs")
    done = cli("check", str(path), "--no-files")
    assert done.returncode == 0, done.stderr


def test_a_symlink_loop_in_the_corpus_is_one_clear_message(tmp_path):
    path = campaign(tmp_path)
    data = path.parent / "data"
    data.mkdir()
    os.symlink("b.jsonl", data / "a.jsonl")
    os.symlink("a.jsonl", data / "b.jsonl")
    path.write_text(GOOD + '\n[corpus]\nroot = "data"\nfiles = { "a.jsonl" = "'
                    + "0" * 64 + '" }\n')
    done = cli("check", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "a.jsonl is a symbolic link that leads nowhere" in done.stderr
