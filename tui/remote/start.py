"""Start each other box of a campaign from the first box: copy, check, start its engine.

For every box whose lots name a `host`, in order, each step refused in words:

1. the host answers and runs the same itera-tui (`check --hosts`' probe);
2. the campaign folder is copied to the lot's `dir` with rsync (resumable; the
   box's own state, outputs and archive are never sent or overwritten);
3. `itera-tui check` runs there: the pinned corpus is checked by its hashes on
   that box (a mismatch stops that box, the file named) and the box's share as
   that box reads the plan must be the share this box gave it;
4. that box's engine starts for its share only, under the same supervisor as
   this box's (`python -m tui.service.daemon supervise`: restarted after a
   crash, its runs adopted, not relaunched), detached from the ssh session
   (setsid, nohup; output to `.itera/engine.log` there), and is waited for
   until its ledger says a new engine started.

A box that cannot start does not stop the others or this box's own share.
"""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass
from pathlib import Path

from ..campaign.boxes import BoxShare, box_shares
from ..campaign.plan import Plan
from ..engine.decision.answer import Decision
from .hosts import check_host, folder_bytes, printable
from .ssh import Ssh, SshSettings

COPY_TIMEOUT_S = 4 * 3600.0  # the whole copy; a stalled one ends after rsync's I/O timeout
START_TIMEOUT_S = 90.0  # from the far engine's launch to its engine_started event
FAR_PYTHON = "python3"  # a lot without `python`: the far PATH's (BoxShare.far_python)
ENGINE_LOG = ".itera/engine.log"


@dataclass(frozen=True)
class BoxStart:
    """How starting one box went, in one line."""

    box: str
    lots: tuple[str, ...]
    ok: bool
    line: str
    pid: int | None = None  # the far engine's pid

    def to_dict(self) -> dict:
        return {"box": self.box, "lots": list(self.lots), "ok": self.ok, "line": self.line,
                "pid": self.pid}


def copy_excludes(plan: Plan) -> tuple[str, ...]:
    """What never goes to another box: this box's state, outputs and archives."""
    outputs = plan.campaign.outputs.strip("/")
    return ("/.itera/", f"/{outputs}/", "/archive/", "__pycache__/")


def far_engine_script(far_dir: str, plan_name: str, lot: str, decide: Decision | None,
                      python: str = FAR_PYTHON) -> str:
    """The far side's start of its engine for one lot's share: the one place that says
    how. The supervisor there (its pid printed, with the engine starts seen so far)
    reads its share from `.itera/lot`."""
    decide_args = f" --decide {shlex.quote(decide.text)}" if decide else ""
    return (f"cd {shlex.quote(far_dir)} || exit 97\n"
            "mkdir -p .itera\n"
            # an engine already drives it there (its lock is held): leave it be
            "if command -v flock >/dev/null 2>&1 && [ -e .itera/engine.lock ] && "
            "! flock -n .itera/engine.lock true; then echo running; exit 0; fi\n"
            # this folder's identity: its engine, room and wrap-up run this lot's share
            f"printf '%s\\n' {shlex.quote(lot)} > .itera/lot\n"
            "before=$(grep -cF '\"engine_started\"' .itera/ledger.jsonl 2>/dev/null)\n"
            f"setsid nohup {python} -m tui.service.daemon supervise{decide_args} "
            f"{shlex.quote(plan_name)} >> {ENGINE_LOG} 2>&1 < /dev/null &\n"
            "echo \"pid=$! before=${before:-0}\"\n")


def _started_script(far_dir: str, pid: int, before: int) -> str:
    """started: an engine started there since the launch (the supervisor's child, so
    not `pid` itself); starting: the supervisor lives; ended: it did not (its log's end)."""
    return (f"cd {shlex.quote(far_dir)} || exit 97\n"
            "now=$(grep -cF '\"engine_started\"' .itera/ledger.jsonl 2>/dev/null)\n"
            f"if [ \"${{now:-0}}\" -gt {before} ] && kill -0 {pid} 2>/dev/null; "
            "then echo started; "
            f"elif kill -0 {pid} 2>/dev/null; then echo starting; else echo ended; "
            f"tail -n 5 {ENGINE_LOG} 2>/dev/null; fi\n")


def start_box(plan: Plan, share: BoxShare, settings: SshSettings | None = None,
              decide: Decision | None = None, copy_timeout_s: float = COPY_TIMEOUT_S,
              start_timeout_s: float = START_TIMEOUT_S) -> BoxStart:
    """Copy, check and start one other box; never raises for what the far side does."""
    settings = settings or SshSettings.from_env()
    head = f"{share.box} (lot{'s' if len(share.lots) > 1 else ''} {', '.join(share.lots)})"

    def refused(text: str) -> BoxStart:
        return BoxStart(share.box, share.lots, False, f"{head}: not started: {text}")

    probe = check_host(share, settings, folder_bytes(plan.root))
    if not probe.ok:
        return refused(probe.line.split(": ", 1)[1])
    ssh = Ssh(share.host, settings)
    far_dir, why = ssh.resolve_dir(share.dir or ".")
    if far_dir is None:
        return refused(f"cannot find its home folder: {printable(why)}")
    made = ssh.run(["mkdir", "-p", far_dir], timeout_s=60)
    if not made.ok:
        return refused(f"cannot make {share.dir} there: {printable(made.reason())}")
    copied = ssh.rsync(f"{plan.root}/", ssh.remote_path(f"{far_dir}/"),
                       timeout_s=copy_timeout_s, excludes=copy_excludes(plan))
    if not copied.ok:
        return refused(f"the copy to {share.dir} did not finish ({printable(copied.reason())}); "
                       "starting again sends only what is missing")
    checked = _far_check(ssh, far_dir, plan.path.name, share)
    if checked:
        return refused(checked)
    lot = share.lots[0]
    launched = ssh.run_script(far_engine_script(far_dir, plan.path.name, lot, decide,
                                                share.far_python), timeout_s=60)
    if launched.ok and launched.stdout.strip() == "running":
        return BoxStart(share.box, share.lots, True,
                        f"{head}: already running in {share.dir}: its engine drives "
                        f"{', '.join(share.variants) or 'no variant'}")
    said = dict(word.partition("=")[::2] for word in
                launched.stdout.strip().rpartition("\n")[2].split() if "=" in word)
    pid_text, before_text = said.get("pid", ""), said.get("before", "")
    if not launched.ok or not pid_text.isdigit() or not before_text.isdigit():
        return refused(f"its engine did not start ({printable(launched.reason() or 'no pid')})")
    pid, before = int(pid_text), int(before_text)
    deadline = time.monotonic() + start_timeout_s
    while time.monotonic() < deadline:
        seen = ssh.run_script(_started_script(far_dir, pid, before), timeout_s=30)
        first, _, rest = seen.stdout.partition("\n")
        if first == "started":
            return BoxStart(share.box, share.lots, True,
                            f"{head}: started in {share.dir}: its engine (supervisor pid "
                            f"{pid}) drives "
                            f"{', '.join(share.variants) or 'no variant'}", pid)
        if first == "ended":
            last = [printable(line) for line in rest.splitlines() if line.strip()]
            why = last[-1] if last else "it wrote nothing"
            return refused(f"its engine ended at once: {why} (see {share.dir}/{ENGINE_LOG})")
        time.sleep(0.5)
    return refused(f"its engine (pid {pid}) did not say it started within "
                   f"{start_timeout_s:.0f} s (see {share.dir}/{ENGINE_LOG} there)")


def _far_check(ssh: Ssh, far_dir: str, plan_name: str, share: BoxShare) -> str | None:
    """`check` on that box: its corpus by its hashes, its share as it reads the plan."""
    script = (f"cd {shlex.quote(far_dir)} || exit 97\n"
              f"exec {share.far_python} -m tui.cli check --json {shlex.quote(plan_name)}\n")
    result = ssh.run_script(script, timeout_s=300)
    if result.unreachable:
        return f"the check there did not answer ({printable(result.reason())})"
    if not result.ok:
        lines = [printable(line.removeprefix("itera-tui: "))
                 for line in result.stderr.splitlines() if line.strip()]
        return ("the check there refused the campaign: " + "; ".join(lines[:3])
                if lines else f"the check there ended with status {result.returncode}")
    try:
        boxes = json.loads(result.stdout)["boxes"]
        theirs = next(b for b in boxes if b["lots"] == list(share.lots))
    except (ValueError, KeyError, TypeError, StopIteration):
        return "the check there printed no share for this lot"
    if theirs["variants"] != list(share.variants):
        return (f"that box reads its share as {', '.join(theirs['variants']) or 'nothing'}, "
                f"this box gave it {', '.join(share.variants) or 'nothing'}: the plans differ")
    return None


def start_boxes(plan: Plan, settings: SshSettings | None = None,
                decide: Decision | None = None, on_line=None) -> list[BoxStart]:
    """Start every other box, one after another; each result said as it comes."""
    out = []
    for share in box_shares(plan):
        if not share.remote:
            continue
        result = start_box(plan, share, settings, decide)
        if on_line is not None:
            on_line(result.line)
        out.append(result)
    return out


