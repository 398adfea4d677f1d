"""The first box's wrap-up pulls each other box's part, over rsync, and checks it.

For each other box: wait (with a deadline) until its engine has built its own
part bundle or has ended; pull its ledger and run directories and its part
bundle into `.itera/boxes/<box>/` (rsync, resumable: a pull cut by a lost link
sends only the rest next time); check the part bundle against its own manifest
after the copy, and redo a torn copy once with rsync's `--checksum`; check that
every run the part's manifest names came with its run directory. A box that
cannot be reached for `link_grace_s` is a Part with `missing` said in words, and
the merge goes on without it.
"""

from __future__ import annotations

import json
import shlex
import time
from pathlib import Path

from ..bundle.parts import Part, write_part_record
from ..bundle.bundle_check import verify_bundle
from ..campaign.boxes import BoxShare, box_shares, is_multi_box
from ..campaign.plan import Plan
from .hosts import printable
from .ssh import Ssh, SshSettings

PART_WAIT_S = 6 * 3600.0  # how long a box still running its share is waited for
LINK_GRACE_S = 120.0  # how long a box that does not answer is tried again
POLL_S = 2.0
PULL_TIMEOUT_S = 4 * 3600.0


RSYNC_LINK_ERRORS = (10, 12, 30, 35, 255)  # socket, protocol stream, timeouts, ssh itself


def _status_script(far_dir: str, outputs: str) -> str:
    """done: its part bundle is built; running: its engine holds the lock; never: no
    ledger there; idle: its engine ended without a part."""
    return (f"cd {shlex.quote(far_dir)} || {{ echo nofolder; exit 0; }}\n"
            "if [ ! -f .itera/ledger.jsonl ]; then echo never; "
            "elif grep -qF '\"wrapup_done\"' .itera/ledger.jsonl 2>/dev/null && "
            f"[ -f {shlex.quote(outputs)}/bundle/manifest.json ]; then echo done; "
            "elif command -v flock >/dev/null 2>&1 && [ -e .itera/engine.lock ] && "
            "! flock -n .itera/engine.lock true; then echo running; else echo idle; fi\n")


def _retry(call, grace_s: float, poll_s: float):
    """call() -> (value, why or None, link_down), tried again while the link is down."""
    deadline = time.monotonic() + grace_s
    while True:
        value, why, link_down = call()
        if why is None or not link_down or time.monotonic() >= deadline:
            return value, why
        time.sleep(poll_s)


def pull_part(plan: Plan, share: BoxShare, settings: SshSettings | None = None,
              say=None, wait_s: float = PART_WAIT_S, link_grace_s: float = LINK_GRACE_S,
              poll_s: float = POLL_S) -> Part:
    """Wait for, pull and check one box's part; never raises for what the far side does."""
    settings = settings or SshSettings.from_env()
    say = say or (lambda line: None)
    ssh = Ssh(share.host, settings)
    base = Part(share.box, share.lots, share.variants)

    def missing(text: str) -> Part:
        part = Part(share.box, share.lots, share.variants, missing=text)
        write_part_record(plan.state_dir / "boxes" / part.slug, part)
        return part

    def resolve():
        found, why = ssh.resolve_dir(share.dir or ".")
        return found, (None if found else why), True

    far_dir, why = _retry(resolve, link_grace_s, poll_s)
    if far_dir is None:
        return missing(f"unreachable at wrap-up: {printable(why)}")
    outputs = plan.campaign.outputs.strip("/")
    deadline = time.monotonic() + wait_s
    said = False
    while True:
        status, why = _retry(lambda: _status(ssh, far_dir, outputs), link_grace_s, poll_s)
        if status is None:
            return missing(f"unreachable at wrap-up: {printable(why)}")
        if status in ("nofolder", "never"):
            return missing(f"its engine never started in {share.dir} there")
        if status in ("done", "idle") or time.monotonic() >= deadline:
            break
        if not said:
            say(f"{share.box}: its share still runs; waiting for its part (up to "
                f"{wait_s / 3600:.3g} h; `itera-tui wrapup --lot {share.lots[0]}` in "
                f"{share.dir} there ends it now)")
            said = True
        time.sleep(poll_s)
    folder = plan.state_dir / "boxes" / base.slug
    state = folder / "state"
    (state / "runs").mkdir(parents=True, exist_ok=True)
    say(f"{share.box}: pulling its part")
    copies = [(f"{far_dir}/.itera/ledger.jsonl", f"{state}/ledger.jsonl", False),
              (f"{far_dir}/.itera/runs/", f"{state}/runs/", True)]
    if status == "done":
        copies.append((f"{far_dir}/{outputs}/bundle/", f"{folder}/bundle/", True))
    for source, target, delete in copies:
        copied, why = _retry(lambda: _pull(ssh, source, target, delete), link_grace_s, poll_s)
        if why is not None:
            return missing(f"the pull did not finish ({printable(why)}); pulling again "
                           "sends only the rest")
    part = _checked(ssh, base, folder, far_dir, status == "done", outputs)
    write_part_record(folder, part)
    own = {True: "", False: " (its own part bundle did not verify after the pull)",
           None: " (it built no part bundle of its own)"}[part.part_verified]
    say(f"{share.box}: part pulled{own}" + (f"; {part.missing}" if part.missing else ""))
    return part


def _status(ssh: Ssh, far_dir: str, outputs: str):
    result = ssh.run_script(_status_script(far_dir, outputs), timeout_s=30)
    if result.unreachable:
        return None, result.reason(), True
    return (result.stdout.strip().splitlines() or ["idle"])[-1], None, False


def _pull(ssh: Ssh, source: str, target: str, delete: bool, checksum: bool = False):
    result = ssh.rsync(ssh.remote_path(source), target, timeout_s=PULL_TIMEOUT_S,
                       delete=delete, checksum=checksum)
    link_down = result.unreachable or result.returncode in RSYNC_LINK_ERRORS
    return result, (None if result.ok else result.reason()), link_down


def _checked(ssh: Ssh, base: Part, folder: Path, far_dir: str, built: bool,
             outputs: str) -> Part:
    """The pulled part against its own manifest; a torn copy is pulled again, by content."""
    from dataclasses import replace

    part = replace(base, state_dir=folder / "state", far_root=far_dir)
    if not built:
        return replace(part, part_verified=None)
    bundle = folder / "bundle"
    result = verify_bundle(bundle, reload=False)
    if not result.verified:  # torn: pull again comparing content, not size and time
        _pull(ssh, f"{far_dir}/{outputs}/bundle/", f"{bundle}/", True, checksum=True)
        result = verify_bundle(bundle, reload=False)
    failures = tuple(f"{f['path']}: {f['problem']}" for f in result.failures)
    runs = _manifest_runs(bundle)
    lacking = [rid for rid in runs if not (folder / "state" / "runs" / rid).is_dir()]
    if lacking:
        return replace(part, part_verified=result.verified, part_failures=failures,
                       missing=f"runs {', '.join(lacking)} named by its part came without "
                               "their run directory")
    return replace(part, part_verified=result.verified, part_failures=failures)


def _manifest_runs(bundle: Path) -> list[str]:
    try:
        data = json.loads((bundle / "manifest.json").read_text())
        return [r["id"] for r in data.get("runs", []) if isinstance(r.get("id"), str)]
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        return []


def pull_parts(plan: Plan, settings: SshSettings | None = None, say=None,
               **kw) -> tuple[Part, ...]:
    """Every other box's part, for the first box's wrap-up ((): a one-box plan)."""
    if not is_multi_box(plan):
        return ()
    return tuple(pull_part(plan, share, settings, say, **kw)
                 for share in box_shares(plan) if share.remote)
