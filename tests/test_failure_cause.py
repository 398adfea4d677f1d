"""A failed run's reason is its exception line, not the decoration under it (issue 41,
item 4): a torchrun run that failed in teardown read `failed (exit 1): ======…`, the
rule of `=` signs that ends torchrun's ChildFailedError report; its cause is the
child's `RuntimeError: …` further up in stderr."""

import json
import sys

import pytest

from enginekit import control_only, drive, write_plan

# torch 2.13's torchrun, as captured from `torchrun --standalone --nproc-per-node 1`
# of tests/scripts/teardown_fail.py (paths shortened)
TORCHRUN = """\
Traceback (most recent call last):
  File "scripts/teardown_fail.py", line 8, in <module>
    raise RuntimeError("NCCL watchdog: process group destroyed while a collective was pending")
RuntimeError: NCCL watchdog: process group destroyed while a collective was pending
E1204 05:57:33.800000 12952 site-packages/torch/distributed/elastic/multiprocessing/api.py:1002] failed (exitcode: 1) local_rank: 0 (pid: 13045) of binary: python
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
  File "site-packages/torch/distributed/elastic/multiprocessing/errors/__init__.py", line 367, in wrapper
    return f(*args, **kwargs)
           ^^^^^^^^^^^^^^^^^^
  File "site-packages/torch/distributed/launcher/api.py", line 383, in launch_agent
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError: 
============================================================
teardown_fail.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2026-12-04_05:57:33
  host      : localhost
  rank      : 0 (local_rank: 0)
  exitcode  : 1 (pid: 13045) 
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""
CAUSE = "RuntimeError: NCCL watchdog: process group destroyed while a collective was pending"


def cause_of(tmp_path, text: str):
    from tui.engine.conclusion.crash import failure_cause

    (tmp_path / "stderr.log").write_text(text)
    return failure_cause(tmp_path)


def test_torchruns_report_gives_way_to_the_childs_exception(tmp_path):
    from tui.engine.conclusion.crash import last_error_lines

    assert cause_of(tmp_path, TORCHRUN) == CAUSE
    assert "=" * 20 not in " ".join(last_error_lines(tmp_path, 3))


def test_the_wrapper_alone_is_the_cause_with_its_root_cause_fields(tmp_path):
    """The child's own lines went elsewhere (another rank's log): torchrun's exception,
    with what its report says of the root cause (`<N/A>` says nothing)."""
    block = TORCHRUN[TORCHRUN.index("torch.distributed.elastic"):]
    assert cause_of(tmp_path, block) == ("torch.distributed.elastic.multiprocessing.errors."
                                         "ChildFailedError: (exitcode 1 (pid: 13045))")


@pytest.mark.parametrize("text, cause", [
    ("[rank1]: Traceback (most recent call last):\n[rank1]:   File \"t.py\", line 3\n"
     "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
     "\n-----\n", "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate "
     "2.00 GiB"),
    ("╭──── Traceback (most recent call last) ────╮\n│ t.py:3 in <module> │\n"
     "╰──────────────────────────────────────────╯\nValueError: bad shape\n\n",
     "ValueError: bad shape"),
    ("KeyError: 'x'\n\nDuring handling of the above exception, another exception "
     "occurred:\n\nTraceback (most recent call last):\n  File \"t.py\"\nKeyboardInterrupt\n"
     "••••••••\n", "KeyboardInterrupt"),
    ("loading shards\nKilled\n= = = =\n\n", "Killed"),
    ("=====\n─────\n\n", None),
])
def test_the_last_exception_line_else_the_last_line_that_says_something(tmp_path, text,
                                                                        cause):
    assert cause_of(tmp_path, text) == cause


def test_the_failed_run_notice_names_its_exception(tmp_path):
    from test_notify import compose_all, ev, notify_plan
    from tui.campaign import load_plan

    plan = load_plan(notify_plan(tmp_path, '[notify]\nurls = ["json://h.example/x"]\n'))
    run_dir = plan.state_dir / "runs" / "control-a-1"
    run_dir.mkdir(parents=True)
    (run_dir / "stderr.log").write_text(TORCHRUN)
    launched = ev(1, "run_launched", run="control-a-1", target="control", kind="run",
                  category="mandatory", attempt=1, config_hash="a")
    (_, notice) = compose_all(plan, [launched, ev(2, "run_exited", run="control-a-1",
                                                  exit_code=1)])
    assert notice.body.startswith(f"exit status 1: {CAUSE}; see .itera/runs/control-a-1/")


@pytest.mark.slow
def test_a_torchrun_run_that_fails_in_teardown_is_rejected_with_its_exception(tmp_path):
    from tui.service.status import status_dict

    argv = [sys.executable, "-m", "torch.distributed.run", "--standalone",
            "--nproc-per-node", "1", "scripts/teardown_fail.py"]
    path = write_plan(tmp_path, control_only(json.dumps(argv)))
    engine = drive(path, timeout=180)
    (run,) = engine.state.runs
    assert run.state == "failed" and run.exit_code == 1
    stderr = (tmp_path / ".itera/runs" / run.id / "stderr.log").read_text()
    assert stderr.rstrip().endswith("=" * 60)  # what the reason used to be
    (rejected,) = status_dict(path)["budget"]["rejections"]
    assert rejected["cause"] == f"failed (exit 1): {CAUSE}"
