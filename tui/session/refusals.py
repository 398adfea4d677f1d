"""What an action cannot do, or costs, said before it is done: one home for every face.

The room, the command line and a client of the engine process get the same
words from here (through `CampaignSession`). `c` on a run that has no way
to checkpoint would say "requested" and nothing would ever come; `s` on a mandatory run silently takes away what the
conclusion needs. These functions say why, in a sentence, from what the
plan, the ledger and the run's own files tell.
"""

from __future__ import annotations

from pathlib import Path


def _writes_sdk_records(run_dir: Path) -> bool:
    """The SDK and the framework callbacks write metrics.jsonl; a script that only
    prints is read through the `[metrics]` regexes and never sees a request."""
    try:
        return (run_dir / "metrics.jsonl").stat().st_size > 0
    except OSError:
        return False


def not_reporting_yet(run, records: int | None) -> bool:
    """The run has given no record at all yet (`records`: the engine's count from its
    output and the SDK): whether it speaks the SDK cannot be told, so a request is
    sent and waits in its control file for the SDK to read it."""
    return records == 0 and not run.checkpoints


def checkpoint_refusal(plan, run, runs_dir: Path, records: int | None = None) -> str | None:
    """None when the run can answer a checkpoint request (or may: it has not started
    reporting yet), else why it cannot.

    A run can when it acknowledged a checkpoint before, when the plan watches
    checkpoint files (`[checkpoint] watch`), or when it writes SDK / callback
    records (those read the control file the request goes to). Reads one stat:
    call it off the UI thread.
    """
    if run.checkpoints or plan.checkpoint.watch:
        return None
    if _writes_sdk_records(runs_dir / run.id) or not_reporting_yet(run, records):
        return None
    return (f"{run.id} cannot checkpoint on request: it never acknowledged a checkpoint, "
            "it writes no SDK or framework-callback records (metrics.jsonl), and the plan "
            "has no [checkpoint] watch. Use tui.training (run.checkpoint_requested / "
            "save_checkpoint), the HF or Lightning callback, or a watch glob.")


def checkpoint_sent_text(run_id: str, waiting: bool) -> str:
    """What `c` answers once the request is written to the run's control file."""
    if waiting:
        return (f"checkpoint requested for {run_id}: it has not started reporting yet; the "
                "request waits in its control file and is answered once the run reads it "
                "(the itera SDK or a callback; a script that only prints never will)")
    return f"checkpoint requested for {run_id}; acknowledged when the file is verified"


def stop_loss(plan, row, label: str | None = None) -> str | None:
    """What is lost by stopping this run (a `RunState` or a room's row, with the label
    a person reads), when the plan says it is needed; else None."""
    if label is not None or not hasattr(row, "label"):
        from types import SimpleNamespace

        row = SimpleNamespace(category=row.category, kind=row.kind, target=row.target,
                              label=label or row.id)
    if row.category != "mandatory":
        return None
    if row.kind == "run" and row.target == plan.campaign.control:
        return (f"{row.label} is the control's full run: the conclusion compares every "
                "variant with it. Stopped, it has no completed control and the verdict "
                "will be inconclusive (the run keeps its cost).")
    if row.kind == "run":
        return (f"{row.label} is mandatory: the conclusion needs it. Stopped, the verdict "
                "will be inconclusive for it (the run keeps its cost).")
    if row.kind == "pilot":
        return (f"{row.label} is a mandatory pilot: the decision compares the variants' "
                "pilots with it. Stopped, the decision point has no figure to compare with.")
    if row.kind == "post":
        return (f"{row.label} is a mandatory step after the runs: stopped, it counts as "
                "failed and what it makes is missing from the bundle.")
    return (f"{row.label} is a check the campaign needs: stopped, it counts as failed and "
            "no pilot or run starts after it (the campaign blocks).")
