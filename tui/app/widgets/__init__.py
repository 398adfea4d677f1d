"""The control room's panels; each draws a frozen model and redraws only on change."""

from .chart import LossChart
from .events import EventsLog
from .gpu import GpuPanel
from .header import RoomHeader
from .runs import RunsTable
from .timeline import Timeline

__all__ = ["LossChart", "EventsLog", "GpuPanel", "RoomHeader", "RunsTable", "Timeline"]
