"""Messages the workers post to the UI thread: frozen data only, never live objects."""

from __future__ import annotations

from textual.message import Message


class RoomUpdated(Message):
    def __init__(self, room) -> None:
        super().__init__()
        self.room = room


class LedgerEvent(Message):
    def __init__(self, event: dict) -> None:
        super().__init__()
        self.event = event


class HistoryLoaded(Message):
    def __init__(self, events: list[dict]) -> None:
        super().__init__()
        self.events = events


class Notice(Message):
    """A line for the person: an action's result or a refusal."""

    def __init__(self, text: str, severity: str = "information", title: str = "",
                 log: bool = False, t: float | None = None) -> None:
        super().__init__()
        self.text = text
        self.severity = severity
        self.title = title
        self.log = log
        self.t = t


class WrapupProgress(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
