"""Moved: ``phaseaware.assembly.evidence``."""

from phaseaware.assembly.evidence import *  # noqa: F403
from phaseaware.assembly.evidence import __all__ as __all__
