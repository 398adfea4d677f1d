"""One-line callbacks that connect the frameworks people train with to itera-tui.

    from tui.integrations.hf import IteraCallback          # transformers.Trainer
    trainer = Trainer(..., callbacks=[IteraCallback()])

    from tui.integrations.lightning import IteraCallback   # lightning / pytorch_lightning
    trainer = L.Trainer(..., callbacks=[IteraCallback()])

A user otherwise writes 10-14 lines of glue per framework (metrics, checkpoint
and stop requests, ITERA_MAX_STEPS, acknowledgements) and still gets details
wrong, such as HF's NaN-filtered loss that hides a divergence from the stop
rules. The callbacks speak the run protocol through the SDK (`tui.training`),
so there is one implementation of it. Outside itera-tui (no ITERA_RUN_DIR) they
do nothing.

Importing this package, or `tui.integrations.hf` / `tui.integrations.lightning`,
imports no torch, transformers or lightning: the framework is imported when
`IteraCallback` is first looked up, and a missing framework is a clear
ImportError naming the extra to install.
"""

from __future__ import annotations

import os


def resume_from(env=None) -> str | None:
    """The checkpoint the engine asks this run to resume from (ITERA_RESUME), or None.

    Pass it straight to the framework: `trainer.train(resume_from_checkpoint=resume_from())`
    (HF) or `trainer.fit(model, ckpt_path=resume_from())` (Lightning); None means a
    fresh start for both."""
    env = os.environ if env is None else env
    path = env.get("ITERA_RESUME", "").strip()
    return path or None


__all__ = ["resume_from"]
