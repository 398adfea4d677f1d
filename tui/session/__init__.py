"""The one place that wires a campaign, for both faces.

`CampaignSession` opens the plan and the engine, owns the probes (sampled
once, by it), joins GPUs to runs, projects the end, concludes, runs the
wrap-up and applies a person's actions, returning one frozen
`SessionSnapshot` per step. `itera-tui run --headless` is a short loop over
it; the control room takes it through the `SessionSource` protocol. The
ending (`tui.session.ending`) is imported where it is needed, not here: the
room's first frame does without it.
"""

from ..lazy import lazy_exports

__all__ = ["ActionResult", "CampaignSession", "load_campaign", "Projection", "SessionSnapshot",
           "SessionSource", "WrapupProgress", "default_probes"]
# loaded on first use: a client of the engine process (the room) imports the frozen values
# and the plan loader without the engine that `CampaignSession` wires
__getattr__ = lazy_exports(__name__, globals(), {
    "ActionResult": "snapshot", "Projection": "snapshot", "SessionSnapshot": "snapshot",
    "WrapupProgress": "snapshot", "CampaignSession": "session", "load_campaign": "loading",
    "SessionSource": "source", "default_probes": "probes"})
