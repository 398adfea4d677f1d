"""Whether a run can answer a checkpoint request: one rule for the engine and every face.

A request is written to the run's control file; only a run that speaks the run
protocol (the itera SDK, the HF or Lightning callback) ever reads it. A script
that only prints (read through the `[metrics]` regexes) never will, and a
`[checkpoint] watch` glob only sees the files it writes by itself, on its own
schedule: `c` on such a run would say "requested" and nothing would ever come.
So the engine refuses the request, with why, and so does each face, in the same
words (the session passes the engine's refusal on). The same rule tells a stop
rule and the box-down grace whether asking for a checkpoint first is worth it.

A run has shown it can answer when it acknowledged a checkpoint through the
protocol or wrote SDK / callback records (metrics.jsonl). A run that has given
no record yet cannot be told apart: the request is sent and waits in its control
file for the SDK to read it.
"""

from __future__ import annotations

from ..ledger.state import RunState

WATCHED = "watched"  # an acknowledgement's mode for a file `[checkpoint] watch` found


def awaiting_first_record(run: RunState, records: int | None) -> bool:
    """The run has given no record at all yet (`records`: the engine's count from its
    output and the SDK) and never acknowledged a checkpoint: a request waits for it."""
    return records == 0 and not run.checkpoints


def can_checkpoint(run: RunState, records: int | None, sdk_records: int | None) -> bool:
    """Whether a request to `run` can be answered (or may be: it has not reported yet).
    `sdk_records`: how many of its records came through the SDK's metrics.jsonl; None
    for either: the engine does not read the run (yet), so it cannot tell."""
    if any(c.mode != WATCHED for c in run.checkpoints):
        return True  # it answered through the protocol before
    return not records or sdk_records is None or sdk_records > 0


def checkpoint_refusal(plan, run: RunState, records: int | None,
                       sdk_records: int | None) -> str | None:
    """None when `can_checkpoint`, else why not, in the words every face shows."""
    if can_checkpoint(run, records, sdk_records):
        return None
    if plan.checkpoint.watch:
        also = (" (the checkpoints it writes by itself are still watched: [checkpoint] "
                "watch). Use tui.training (run.checkpoint_requested / save_checkpoint) or "
                "the HF or Lightning callback.")
    else:
        also = (". Use tui.training (run.checkpoint_requested / save_checkpoint), the HF or "
                "Lightning callback, or a [checkpoint] watch glob for the checkpoints it "
                "writes by itself.")
    return (f"{run.id} cannot checkpoint on request: it only prints (no itera SDK or "
            "framework-callback records in metrics.jsonl, no checkpoint acknowledged), so "
            f"it never reads a request{also}")
