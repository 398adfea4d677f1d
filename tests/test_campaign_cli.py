"""`itera-tui check` on good and bad input: exit codes and one clear message."""

import json

import pytest

from clikit import cli

GOOD = """
[campaign]
name = "demo"
question = "does b beat the control?"

[[lot]]
gpu = "RTX 4090"
days = 3

[[variant]]
id = "control"
category = "mandatory"
command = ["python", "train.py"]
hours = 10

[[variant]]
id = "b"
category = "useful"
command = "python train.py --lr 1e-3"
hours = 10
"""


def check(write_campaign, text, *extra):
    path = write_campaign(text)
    return cli("check", str(path), *extra)


def assert_clear_error(proc, *needles):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, proc.stderr


def test_valid_plan_prints_calendar_and_json(write_campaign):
    proc = check(write_campaign, GOOD)
    assert proc.returncode == 0, proc.stderr
    assert "slack" in proc.stdout and "47.14 USD" in proc.stdout
    data = json.loads(check(write_campaign, GOOD, "--json").stdout)
    for key in ("window_hours", "end_to_end_hours", "machine_hours", "human_hours",
                "slack_hours", "fits", "over_hours", "cost_usd", "advice"):
        assert key in data
    assert data["cost_usd"] == {"lots": 47.14, "expenses": 0.0, "total": 47.14}
    assert data["end_to_end_hours"] == 20.5


def test_plan_that_does_not_fit_exits_1_with_advice(write_campaign):
    proc = check(write_campaign, GOOD.replace("hours = 10", "hours = 40"), "--json")
    assert proc.returncode == 1  # valid input (2 is for bad input), but it will not fit
    data = json.loads(proc.stdout)
    assert data["fits"] is False
    assert {a["kind"] for a in data["advice"]} >= {"longer_lot", "drop_optional"}


def test_broken_toml(write_campaign):
    assert_clear_error(check(write_campaign, GOOD + "\n[[variant]\n"), "not valid TOML")


def test_wrong_type(write_campaign):
    proc = check(write_campaign, GOOD.replace("hours = 10\n\n[[variant]]",
                                              'hours = "ten"\n\n[[variant]]'))
    assert_clear_error(proc, "variant[0].hours: expected a number")


def test_bad_category_names_key_path(write_campaign):
    proc = check(write_campaign, GOOD.replace('category = "useful"', 'category = "optional"'))
    assert_clear_error(proc, 'variant[1].category: expected mandatory|useful|exploratory, '
                             'got "optional"')


def test_unknown_key_gets_did_you_mean(write_campaign):
    proc = check(write_campaign, GOOD.replace('category = "useful"',
                                              'category = "useful"\nprioirty = 2'))
    assert_clear_error(proc, "variant[1].prioirty: unknown key", 'did you mean "priority"')


def test_cycle_in_after(write_campaign):
    text = GOOD.replace('hours = 10\n\n[[variant]]', 'hours = 10\nafter = ["b"]\n\n[[variant]]')
    text = text.replace('command = "python train.py --lr 1e-3"',
                        'command = "python train.py --lr 1e-3"\nafter = ["control"]')
    assert_clear_error(check(write_campaign, text), "dependency cycle")


def test_negative_duration(write_campaign):
    proc = check(write_campaign, GOOD.replace("hours = 10\n\n[[variant]]",
                                              "hours = -1\n\n[[variant]]"))
    assert_clear_error(proc, "variant[0].hours: must be greater than 0")


def test_missing_corpus_file(write_campaign):
    text = GOOD + '\n[corpus]\nroot = "data"\nfiles = { "train.jsonl" = "' + "0" * 64 + '" }\n'
    assert_clear_error(check(write_campaign, text), "corpus file not found")


def test_missing_campaign_file(tmp_path):
    assert_clear_error(cli("check", str(tmp_path / "nope.toml")), "no such file")


def test_many_problems_reported_together(write_campaign):
    text = GOOD.replace('category = "useful"', 'category = "optional"').replace(
        "days = 3", "days = 3\ngpuz = 2")
    proc = check(write_campaign, text)
    assert_clear_error(proc, "variant[1].category", "lot[0].gpuz")


def test_ids_that_would_escape_the_state_folder_are_refused(write_campaign):
    for bad in ("../../escape", "/tmp/x", "a/b"):
        proc = check(write_campaign, GOOD.replace('id = "b"', f'id = "{bad}"'))
        assert_clear_error(proc, "variant[1].id:", "names folders on disk")
    proc = check(write_campaign, GOOD.replace('id = "b"', 'id = ""'))
    assert_clear_error(proc, "variant[1].id: must not be empty")


def test_infinite_numbers_are_refused(write_campaign):
    proc = check(write_campaign, GOOD.replace("days = 3", "minutes = inf"))
    assert_clear_error(proc, "lot[0].minutes: expected a finite number, got inf")
    proc = check(write_campaign, GOOD.replace("days = 3", "days = 3\nprice_usd = -5"))
    assert_clear_error(proc, "lot[0].price_usd: must not be negative")
    assert "no catalog price" not in proc.stderr


def test_a_variant_cannot_wait_for_a_step_that_runs_after_the_variants(write_campaign):
    text = GOOD + '\n[[step]]\nid = "report"\nkind = "wrapup"\nhours = 1\n'
    text = text.replace('command = "python train.py --lr 1e-3"',
                        'command = "python train.py --lr 1e-3"\nafter = ["report"]')
    assert_clear_error(check(write_campaign, text),
                       'variant[1].after: "report" runs after the variants')


def test_new_archives_the_last_campaign_and_never_silently(tmp_path):
    from enginekit import printer_cmd, write_plan
    from fakeprocs import drive_plan

    path = write_plan(tmp_path, f"""
    [[variant]]
    id = "control"
    category = "mandatory"
    command = {printer_cmd("--steps", "3")}
    minutes = 1
    """)
    drive_plan(path)  # a campaign that ran, on fake processes: a ledger to archive
    ledger = (tmp_path / ".itera" / "ledger.jsonl").read_bytes()
    asked = cli("new", str(path), cwd=tmp_path)  # no terminal, no --yes: refused
    assert asked.returncode == 2 and "--yes" in asked.stderr
    assert (tmp_path / ".itera").is_dir()
    done = cli("new", "--yes", str(path), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (archive,) = (tmp_path / "archive").iterdir()
    assert (archive / ".itera" / "ledger.jsonl").read_bytes() == ledger  # kept, not deleted
    assert not (tmp_path / ".itera").exists() and ".itera" in done.stdout
    again = cli("new", "--yes", str(path), cwd=tmp_path)
    assert again.returncode == 0 and "nothing to archive" in again.stdout


def test_corpus_and_deliverables_that_leave_the_campaign_folder_are_refused(tmp_path):
    outside = tmp_path / "data"
    outside.mkdir()
    (outside / "a.txt").write_text("x")
    import hashlib

    digest = hashlib.sha256(b"x").hexdigest()
    camp = tmp_path / "camp"
    camp.mkdir()
    base = f"""
[campaign]
name = "n"
question = "q"

[[lot]]
gpu = "cpu"
hours = 1
price_usd = 1.0

[[variant]]
id = "control"
category = "mandatory"
command = ["true"]
minutes = 1
"""
    (camp / "campaign.toml").write_text(base + f"""
[corpus]
root = "../data"
files = {{ "a.txt" = "{digest}" }}

[deliverables]
files = ["../../etc/passwd", "model.pt"]
""")
    proc = cli("check", "campaign.toml", cwd=camp)
    assert proc.returncode == 2
    assert 'corpus.root: "../data" leaves the campaign folder' in proc.stderr
    assert "read_only = true" in proc.stderr
    assert 'deliverables.files[0]: "../../etc/passwd" must be relative' in proc.stderr
    assert "files[1]" not in proc.stderr
    (camp / "campaign.toml").write_text(base + f"""
[corpus]
root = "../data"
read_only = true
files = {{ "a.txt" = "{digest}" }}
""")
    assert cli("check", "campaign.toml", cwd=camp).returncode == 0


@pytest.mark.parametrize("command", [["status"], ["check", "--no-files"]])
def test_a_campaign_folder_is_taken_where_its_file_is(tmp_path, command):
    """Issue 44, item 8: `itera-tui status DIR` said "[Errno 21] Is a directory" while
    `itera-tui DIR`, `resume` and `init` take the folder: every command does now."""
    (tmp_path / "campaign.toml").write_text(GOOD)
    by_file = cli(*command, tmp_path / "campaign.toml")
    by_folder = cli(*command, tmp_path)
    assert "Is a directory" not in by_folder.stderr
    assert (by_folder.returncode, by_folder.stdout) == (by_file.returncode, by_file.stdout)
    assert by_folder.stdout.strip()
