"""A verified bundle whose delivery to the store failed is not a failed wrap-up
(issue 45 item 6b): `run --headless` says the bundle is fine here, why the delivery
failed and how to fetch it from this box, and exits 7 (docs/commands.md); so does
`itera-tui wrapup`. The commands run in this process, on fake runs and a fake wrap-up
(tests/fakeprocs.py, tests/fakewrapup.py): their words and exit status are the subject."""

from __future__ import annotations

from clikit import cli
from enginekit import control_only, printer_cmd, write_plan
from fakeprocs import drive_plan, fake_host


def test_headless_says_the_bundle_is_fine_and_exits_7_when_its_delivery_fails(tmp_path,
                                                                              monkeypatch):
    helpers = fake_host(monkeypatch).wrapup
    monkeypatch.setattr("tui.session.wrapup.DELIVERY_PAUSE_S", 0.0)  # its retries, at once
    root = tmp_path / "camp"
    root.mkdir()
    store = tmp_path / "store"
    path = write_plan(root, control_only(printer_cmd("--steps", "5")),
                      extra=f'\n[store]\nurl = "file://{store}"\n')
    drive_plan(path)  # the runs end; the wrap-up is still to come
    store.write_text("not a folder\n")  # the store is gone before the wrap-up (as a
    # deleted bucket: nothing can be written there, and no mkdir makes it again)
    proc = cli("run", "--headless", str(path), cwd=root)
    said = proc.stdout + proc.stderr
    assert proc.returncode == 7, said
    assert "wrap-up failed" not in said
    assert "itera-tui: bundle verified here (outputs/bundle); delivery to the store " \
           "failed: " in proc.stderr, proc.stderr
    assert "fetch it from this box with rsync " in proc.stderr, proc.stderr
    assert (root / "outputs/bundle/manifest.json").is_file()
    assert cli("verify", str(root / "outputs/bundle")).returncode == 0
    assert helpers.kinds().count("draw") == 1  # the bundle was built by the fake's hand
    again = cli("wrapup", str(path), cwd=root)  # no engine: in-process
    assert again.returncode == 7, again.stdout + again.stderr
    assert "wrap-up failed" not in again.stdout + again.stderr
    assert "bundle verified here (outputs/bundle); delivery to the store failed: " \
           in again.stderr, again.stderr
