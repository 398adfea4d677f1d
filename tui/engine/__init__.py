"""The campaign engine: launch, watch, stop automatically, remember everything.

Pure Python plus psutil: no textual, no torch. Runs are separate processes in
their own sessions; the ledger is the only memory; state is its replay.
"""

from .engine import Engine, EngineSnapshot
from .errors import EngineError
from .ledger import Ledger, read_ledger
from .state import CampaignState, RunState, replay

__all__ = ["Engine", "EngineSnapshot", "EngineError", "Ledger", "read_ledger",
           "CampaignState", "RunState", "replay"]
