"""Modal screens: every destructive key goes through one of these first."""

from .confirm import ConfirmScreen
from .decision import DecisionScreen
from .drop import DropScreen
from .help import HelpScreen
from .stop import StopScreen
from .wrapup import WrapupScreen

__all__ = ["ConfirmScreen", "DecisionScreen", "DropScreen", "HelpScreen", "StopScreen",
           "WrapupScreen"]
