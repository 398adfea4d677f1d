"""No store secret is ever copied: campaign.toml is frozen into .itera/plan.toml, the
bundle and the store, and `check`, `status` and the report show the store. So every
store option is taken for a secret unless it is known to hold none, and refused by
name (never by value) before anything is written; a store URL's password and query
are refused in the plan, and cut wherever a URL given on the command line is shown.

Each shape the attack found let through is tried alone: `check` and `run --headless`
refuse it, neither says the value, and no file of the campaign folder but the
person's own campaign.toml holds it. In process: a refused plan starts nothing."""

from __future__ import annotations

import pytest

from enginekit import printer_cmd, write_plan
from tui.cli import main

VARIANT = f"""
[[variant]]
id = "control"
category = "mandatory"
command = {printer_cmd("--steps", "5")}
minutes = 1
"""

# (what it is, the [store] table holding it, its value: what must appear nowhere)
SHAPES = [
    ("sse_customer_key", 'options = { sse_customer_key = "SSEC-9f3a1" }', "SSEC-9f3a1"),
    ("SSECustomerKey in s3_additional_kwargs",
     'options = { s3_additional_kwargs = { SSECustomerKey = "SSECK-77b2" } }', "SSECK-77b2"),
    ("an Azure connection_string",
     'options = { connection_string = "DefaultEndpointsProtocol=https;AccountName=acct;'
     'AccountKey=AZK-41c9d" }', "AZK-41c9d"),
    ("an X-Api-Key header", 'options = { headers = { X-Api-Key = "XAPI-5e6f" } }', "XAPI-5e6f"),
    ("a Cookie header", 'options = { headers = { Cookie = "sid=COOK-8a8a" } }', "COOK-8a8a"),
    ("a secret inside a list", 'options = { extra_args = ["--token", "LIST-0c0d"] }',
     "LIST-0c0d"),
    ("pwd", 'options = { pwd = "PWD-3b3b" }', "PWD-3b3b"),
    ("a query in an endpoint", 'options = { endpoint_url = "http://127.0.0.1:9/?t=EPQ-1a1a" }',
     "EPQ-1a1a"),
]


def campaign(root, url: str, table: str):
    root.mkdir()
    return write_plan(root, VARIANT, extra=f'\n[store]\nurl = "{url}"\n{table}\n')


def files_holding(folder, secret: str) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*")
                  if p.is_file() and secret.encode() in p.read_bytes())


@pytest.mark.parametrize("what,table,secret", SHAPES, ids=[s[0] for s in SHAPES])
def test_each_secret_option_is_refused_by_name_and_copied_nowhere(tmp_path, capsys, what,
                                                                  table, secret):
    path = campaign(tmp_path / "camp", "s3://bucket/prefix", table)
    for command in (["check", str(path)], ["run", "--headless", str(path)]):
        assert main(command) == 2, (what, command)
        said = capsys.readouterr()
        assert "may hold a secret" in said.err, said.err
        assert secret not in said.out + said.err, (what, command)
    assert files_holding(tmp_path, secret) == ["camp/campaign.toml"]
    assert not (tmp_path / "camp/.itera/plan.toml").exists()


@pytest.mark.parametrize("url,secret", [("s3://bucket/prefix?secret=URLQ-2d2d", "URLQ-2d2d"),
                                        ("sftp://me:PASS-6f6f@host/x", "PASS-6f6f")])
def test_a_store_url_with_a_query_or_a_password_is_refused_without_echoing_it(
        tmp_path, capsys, url, secret):
    path = campaign(tmp_path / "camp", url, "")
    assert main(["check", str(path)]) == 2
    said = capsys.readouterr()
    assert "carries a password or a query" in said.err
    assert secret not in said.out + said.err
    assert files_holding(tmp_path, secret) == ["camp/campaign.toml"]


def test_what_holds_no_secret_is_kept_and_named(tmp_path, capsys):
    from tui.campaign import load_plan

    arn = "arn:aws:kms:eu-west-1:111122223333:key/0f0e0d0c-aaaa-bbbb-cccc-000011112222"
    path = campaign(tmp_path / "camp", "s3://bucket/prefix", f"""
[store.options]
endpoint_url = "https://s3.example.net"
region_name = "eu-west-1"
profile = "team"
anon = false
use_ssl = true
sse_kms_key_id = "{arn}"
s3_additional_kwargs = {{ ServerSideEncryption = "aws:kms", SSEKMSKeyId = "{arn}" }}
client_kwargs = {{ region_name = "eu-west-1" }}
config_kwargs = {{ signature_version = "s3v4", retries = {{ max_attempts = 5 }} }}
""")
    code, err = main(["check", str(path)]), capsys.readouterr().err
    # no option is refused as a secret; the store itself (not there) may be refused
    assert "secret" not in err and (code in (0, 1) or "store.url: s3://bucket/prefix: "
                                    in err), err
    options = dict(load_plan(path, check_files=False).store.options)
    assert options["sse_kms_key_id"] == arn and options["profile"] == "team"


@pytest.mark.parametrize("command", [["verify"], ["fetch"], ["resume"]])
def test_a_url_given_on_the_command_line_is_shown_without_its_secrets(tmp_path, capsys,
                                                                       command):
    """What `verify`, `fetch` and `resume` print of a store URL given with a token in
    its query (nothing is stored there: each fails, and says where, without it)."""
    url = f"file://{tmp_path}/store?sig=VQ-4e4e"
    (tmp_path / "store?sig=VQ-4e4e").write_text("a file, not a folder: the store fails "
                                                "and its error quotes the path it was given")
    tail = {"verify": [], "fetch": [str(tmp_path / "copy")],
            "resume": [str(tmp_path / "camp"), "--lot",
                       'gpu = "cpu", hours = 1, price_usd = 1']}[command[0]]
    assert main(command + [url] + tail) != 0
    said = capsys.readouterr()
    assert "VQ-4e4e" not in said.out + said.err and "sig=" not in said.out + said.err
    assert f"file://{tmp_path}/store" in said.out + said.err
    assert files_holding(tmp_path / "camp", "VQ-4e4e") == []
