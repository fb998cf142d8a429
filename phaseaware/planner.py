"""Moved: ``phaseaware.assembly.planner``."""

from phaseaware.assembly.planner import *  # noqa: F403
from phaseaware.assembly.planner import __all__ as __all__
