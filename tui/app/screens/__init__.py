"""Modal screens: every destructive key goes through one of these first; a run and the
ending each get a screen of their own."""

from .confirm import ConfirmScreen
from .decision import DecisionScreen
from .done import DoneScreen
from .drop import DropChoice, DropScreen
from .help import HelpScreen
from .run import RunScreen
from .stop import StopScreen
from .wrapup import WrapupScreen

__all__ = ["ConfirmScreen", "DecisionScreen", "DoneScreen", "DropChoice", "DropScreen",
           "HelpScreen", "RunScreen", "StopScreen", "WrapupScreen"]
