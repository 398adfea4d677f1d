"""Notices: the campaign tells the person when it needs them, with no room open.

A rental window runs for days while the person sleeps; a decision point, a
failed run, a lost GPU or a bundle ready to fetch must reach their phone, not
a tmux pane. `Notices` is fed by the ledger (the Journal's subscribers) of
whatever drives the engine (`CampaignSession.open()` starts it), and sends
through Apprise (the `notify` extra; imported only when something is sent)
on its own thread. Above the bundle layer, below the session: it never
imports the room, textual or torch.
"""

from .delivery import Addresses, Delivery, deliver, resolve_addresses
from .notices import NOT_DELIVERED, Composer, Notice
from .sender import Notices, RateLimit

__all__ = ["Addresses", "Composer", "Delivery", "NOT_DELIVERED", "Notice", "Notices",
           "RateLimit", "deliver", "resolve_addresses"]
