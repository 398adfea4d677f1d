"""The campaign engine: launch, watch, stop automatically, remember everything.

Pure Python plus psutil: no textual, no torch. Runs are separate processes in
their own sessions; the ledger is the only memory; state is its replay.

Exports load on first use (`tui.lazy`): a client of the engine process (the
control room) decodes the engine's frozen records (`tui.engine.ledger.state`) without
loading the engine itself.
"""

from ..lazy import lazy_exports

__all__ = ["Engine", "EngineSnapshot", "EngineError", "Ledger", "read_ledger",
           "CampaignState", "RunState", "replay"]
__getattr__ = lazy_exports(__name__, globals(), {
    "Engine": "engine", "EngineSnapshot": "engine", "EngineError": "errors",
    "Ledger": "ledger.file", "read_ledger": "ledger.file", "CampaignState": "ledger.state",
    "RunState": "ledger.state", "replay": "ledger.state"})
