"""The training SDK: what a training script imports to live inside itera-tui.

    from tui import training
    run = training.attach()
    run.log(step, loss=loss.item())
    if run.checkpoint_requested(step) or run.stop_requested():
        run.save_checkpoint(model=model, optimizer=opt, step=step, data_state=...)

It speaks the run protocol of ARCHITECTURE.md (ITERA_* environment, metrics JSONL,
control file, checkpoint acknowledgements). Importing it does not import torch;
torch is imported by the functions that need it.
"""

from .artifact import ArtifactError, ArtifactInfo, load_artifact, save_artifact
from .checkpoint import CheckpointError, CheckpointInfo, load_checkpoint
from .run import NonFiniteMetric, Run, attach

__all__ = [
    "ArtifactError",
    "ArtifactInfo",
    "CheckpointError",
    "CheckpointInfo",
    "NonFiniteMetric",
    "Run",
    "attach",
    "load_artifact",
    "load_checkpoint",
    "save_artifact",
]
