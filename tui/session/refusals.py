"""What an action cannot do, or costs, said before it is done: one home for every face.

The room, the command line and a client of the engine process get the same
words from here (through `CampaignSession`). `s` on a mandatory run silently
takes away what the conclusion needs; these functions say why, in a sentence,
from what the plan and the ledger tell. Whether a run can answer a checkpoint
request is the engine's to say (engine/checkpoints/answerable.py): it refuses
the request itself, and the session passes its words on.
"""

from __future__ import annotations


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
