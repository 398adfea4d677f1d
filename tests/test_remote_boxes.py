"""Lots on other boxes: `host` and `dir` in [[lot]], each box's share in `check`, and
`check --hosts` against real sshds (a ready host, a closed port, one without itera-tui)."""

from __future__ import annotations

import json
import socket
import textwrap

import pytest

from clikit import cli
from conftest import run_cli
from sshkit import CLOSED_ALIAS, Sshd, far_env_without_itera, joined_config, needs_sshd
from sshkit import sshd  # noqa: F401 - a fixture
from tui.campaign import PlanError, load_plan
from tui.campaign.boxes import box_shares, share_of_lot, share_warnings, variant_lots

HEAD = """
[campaign]
name = "two"
question = "does width help?"
metric = "acc"
control = "base"
"""

VARIANTS = """
[[variant]]
id = "base"
category = "mandatory"
command = ["python", "train.py"]
hours = 10

[[variant]]
id = "wide"
category = "useful"
command = ["python", "train.py"]
hours = 10

[[variant]]
id = "deep"
category = "useful"
command = ["python", "train.py"]
hours = 10
"""


def lots(second: str, gpu2: str = "RTX 4090") -> str:
    return f"""
[[lot]]
id = "a"
gpu = "RTX 4090"
days = 3

[[lot]]
id = "b"
gpu = "{gpu2}"
days = 3
{second}
"""


def write(tmp_path, text: str):
    (tmp_path / "train.py").write_text(  # the variants' script (check refuses a missing one)
        "from tui import training\nrun = training.attach()\nrun.log(1, loss=1.0, acc=0.5)\n")
    path = tmp_path / "campaign.toml"
    path.write_text(textwrap.dedent(text))
    return path


def test_a_lot_names_its_host_and_folder(tmp_path):
    plan = load_plan(write(tmp_path, HEAD + lots('host = "root@203.0.113.7 -p 40022"\n'
                                                 'dir = "~/campaigns/two"') + VARIANTS))
    a, b = plan.lots
    assert a.host is None and a.box == "this box"
    assert (b.host.user, b.host.host, b.host.port) == ("root", "203.0.113.7", 40022)
    assert b.dir == "campaigns/two" and b.box == "root@203.0.113.7 -p 40022"
    assert a.devices == (0,) and b.devices == (0,)  # each box counts its own devices


@pytest.mark.parametrize("second, words", [
    ('dir = "x"', 'lot[1].dir: is the campaign folder on the lot\'s host; give host too'),
    ('host = "gpu2"', "lot[1].dir: the campaign folder on gpu2 is needed"),
    ('host = "gpu2 -p 99999"\ndir = "x"', "lot[1].host: 'gpu2 -p 99999': '99999' is not a port"),
    ('hots = "gpu2"', 'did you mean "host"'),
    ('host = "gpu2"\ndir = "../up"', "lot[1].dir: '../up': give a path from the home"),
])
def test_a_wrong_host_or_dir_is_one_clear_line_exit_2(tmp_path, second, words):
    path = write(tmp_path, HEAD + lots(second) + VARIANTS)
    with pytest.raises(PlanError) as err:
        load_plan(path)
    assert any(words in p for p in err.value.problems), err.value.problems
    proc = cli("check", str(path), cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert words in proc.stderr


def test_one_lot_must_be_this_box(tmp_path):
    text = HEAD + lots('host = "gpu2"\ndir = "x"').replace(
        'days = 3\n\n[[lot]]', 'days = 3\nhost = "gpu1"\ndir = "x"\n\n[[lot]]', 1) + VARIANTS
    with pytest.raises(PlanError, match="every lot names a host"):
        load_plan(write(tmp_path, text))


def test_check_says_which_variants_each_box_runs(tmp_path):
    path = write(tmp_path, HEAD + lots('host = "gpu2"\ndir = "campaigns/two"') + VARIANTS)
    plan = load_plan(path)
    where = variant_lots(plan)
    shares = box_shares(plan)
    assert [s.box for s in shares] == ["this box", "gpu2"]
    assert set(shares[0].variants) | set(shares[1].variants) == {"base", "wide", "deep"}
    assert not set(shares[0].variants) & set(shares[1].variants)
    assert where["base"] == "a" and shares[1].variants  # the calendar uses both lanes
    assert shares[0].runs_steps and not shares[1].runs_steps
    assert share_of_lot(plan, "b") == shares[1] and share_of_lot(plan, None) == shares[0]
    assert share_warnings(plan) == []  # same GPU model on both boxes
    proc = cli("check", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert (f"box gpu2:campaigns/two (lots b, RTX 4090): runs "
            f"{', '.join(shares[1].variants)}") in proc.stdout
    assert f"box this box (lots a, RTX 4090): runs {', '.join(shares[0].variants)}; the steps" \
        in proc.stdout
    data = json.loads(cli("check", "--json", str(path), cwd=tmp_path).stdout)
    assert [b["box"] for b in data["boxes"]] == ["this box", "gpu2"]


def test_check_warns_when_control_and_challenger_run_on_different_gpus(tmp_path):
    path = write(tmp_path, HEAD + lots('host = "gpu2"\ndir = "x"\nprice_usd = 80',
                                       gpu2="A100 80GB") + VARIANTS)
    plan = load_plan(path)
    on_b = box_shares(plan)[1].variants
    warnings = share_warnings(plan)
    assert on_b and len(warnings) == len(on_b)
    assert f"variant {on_b[0]} runs on a A100 80GB (lot b, gpu2), the control base on a " \
           "RTX 4090 (lot a, this box): their timings do not compare" in warnings
    proc = cli("check", str(path), cwd=tmp_path)
    assert "warning (boxes): variant" in proc.stdout


def test_a_single_box_plan_prints_no_box_lines(tmp_path):
    path = write(tmp_path, HEAD + lots("") + VARIANTS)
    proc = cli("check", "--hosts", str(path), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "box this box" not in proc.stdout
    assert "no lot names a host: every lot is this box" in proc.stdout


# -- check --hosts over real ssh ---------------------------------------------------------

@pytest.mark.slow
@needs_sshd
def test_check_hosts_one_line_per_host_and_exit_2_where_it_cannot_go_on(sshd, tmp_path):
    bare = Sshd(tmp_path / "bare-sshd", far_env=far_env_without_itera(tmp_path),
                alias="barebox")
    mute = socket.create_server(("127.0.0.1", 0))  # takes the connection, never speaks
    try:
        bare.start()
        config = joined_config(tmp_path / "ssh_config", sshd, bare)
        with open(config, "a") as f:
            f.write(f"Host mutebox\n  HostName 127.0.0.1\n  Port {mute.getsockname()[1]}\n"
                    "  BatchMode yes\n")
        text = HEAD + lots('host = "box2"\ndir = "far/two"') + f"""
[[lot]]
id = "c"
gpu = "RTX 4090"
days = 3
host = "{CLOSED_ALIAS}"
dir = "two"

[[lot]]
id = "d"
gpu = "RTX 4090"
days = 3
host = "barebox"
dir = "two"

[[lot]]
id = "e"
gpu = "RTX 4090"
days = 3
host = "mutebox"
dir = "two"
""" + VARIANTS
        (tmp_path / "first").mkdir()
        path = write(tmp_path / "first", text)
        env = {"ITERA_SSH_CONFIG": str(config), "ITERA_SSH_CONTROL_DIR": str(sshd.control_dir)}
        proc = run_cli("check", "--hosts", str(path), cwd=path.parent, env=env, timeout=180)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "Traceback" not in proc.stdout + proc.stderr
        lines = {line.split(" ")[2]: line for line in proc.stdout.splitlines()
                 if line.startswith("  ") and "(lot" in line}
        assert set(lines) == {"box2", CLOSED_ALIAS, "barebox", "mutebox"}, proc.stdout
        assert "box2 (lot b): ready: python 3." in lines["box2"]
        assert "(same code)" in lines["box2"] and "free for far/two" in lines["box2"]
        assert "no nvidia-smi" in lines["box2"] or "nvidia-smi sees" in lines["box2"]
        assert f"{CLOSED_ALIAS} (lot c): unreachable:" in lines[CLOSED_ALIAS]
        assert "refused" in lines[CLOSED_ALIAS].lower()
        assert "barebox (lot d): package: itera-tui is not installed in " in lines["barebox"]
        assert "(python 3." in lines["barebox"]
        # a host that takes the connection and never answers: ssh's ConnectTimeout ends it
        assert "mutebox (lot e): unreachable:" in lines["mutebox"]
        assert "timed out" in lines["mutebox"] or "deadline" in lines["mutebox"]
        data = json.loads(run_cli("check", "--hosts", "--json", str(path), cwd=path.parent,
                                  env=env, timeout=180).stdout)
        assert [h["ok"] for h in data["hosts"]] == [True, False, False, False]
    finally:
        mute.close()
        bare.stop()


@pytest.mark.slow
@needs_sshd
def test_check_hosts_refuses_a_far_side_with_other_code(sshd, tmp_path):
    """Same version, edited code there: refused in words (the digest differs)."""
    import shutil

    from conftest import REPO

    other = tmp_path / "other-checkout"
    shutil.copytree(REPO / "tui", other / "tui",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "tui" / "engine" / "rules.py", "a") as f:
        f.write("\n# an edit on the far box\n")
    edited = Sshd(tmp_path / "edited-sshd",
                  far_env={**sshd.far_env, "PYTHONPATH": str(other)}, alias="editbox")
    try:
        edited.start()
        (tmp_path / "first").mkdir()
        path = write(tmp_path / "first", HEAD + lots('host = "editbox"\ndir = "two"') + VARIANTS)
        proc = run_cli("check", "--hosts", str(path), cwd=path.parent, timeout=180,
                       env=edited.client_env)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert "editbox (lot b): version: itera-tui in " in proc.stdout
        assert " there is 0.1.0 (code " in proc.stdout
        assert "install the same copy there" in proc.stdout
    finally:
        edited.stop()
