"""Errors the engine reports to a user as one clear line (exit status 2, or its own)."""

from pathlib import Path

EXIT_LEDGER_UNWRITABLE = 5  # the engine stopped: its ledger cannot be written


class EngineError(Exception):
    """A refused action or unusable state, e.g. dropping a mandatory variant."""


class CampaignDriven(EngineError):
    """Another process holds the campaign's engine lock: one driver per campaign."""


class LedgerUnwritable(EngineError, OSError):
    """The ledger cannot be written (read-only, immutable, append-only and torn, a full
    disk): the engine stops, since every fact must be recorded before it is acted on.
    An OSError too (errno, filename), for the callers that handle any failed write."""

    def __init__(self, errno_: int | None, reason: str, path: str, what: str):
        OSError.__init__(self, errno_, reason, path)
        self.reason, self.what = reason, what

    def __str__(self) -> str:
        name = "/".join(Path(self.filename).parts[-2:]) if self.filename else "the ledger"
        return (f"the engine stopped: it cannot write {name} ({self.reason}): {self.what}. "
                "Runs keep going in their own sessions; make the ledger writable again "
                "(permissions, chattr -i/-a, free disk) and start again to reattach.")

