"""The one place that wires a campaign, for both faces.

`CampaignSession` opens the plan and the engine, owns the probes (sampled
once, by it), joins GPUs to runs, projects the end, concludes, runs the
wrap-up and applies a person's actions, returning one frozen
`SessionSnapshot` per step. `itera-tui run --headless` is a short loop over
it; the control room takes it through the `SessionSource` protocol. The
ending (`tui.session.ending`) is imported where it is needed, not here: the
room's first frame does without it.
"""

from .probes import default_probes
from .session import ActionResult, CampaignSession, load_campaign
from .snapshot import Projection, SessionSnapshot, WrapupProgress
from .source import SessionSource

__all__ = ["ActionResult", "CampaignSession", "load_campaign", "Projection", "SessionSnapshot",
           "SessionSource", "WrapupProgress", "default_probes"]
