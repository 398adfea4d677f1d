"""Errors the engine reports to a user as one clear line (exit status 2)."""


class EngineError(Exception):
    """A refused action or unusable state, e.g. dropping a mandatory variant."""
