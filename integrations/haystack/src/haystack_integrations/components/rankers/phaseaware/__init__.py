"""phaseaware-haystack: a ``LostInTheMiddleRanker`` drop-in that orders by position."""

from haystack_integrations.components.rankers.phaseaware.ranker import PhaseAwareRanker

__all__ = ["PhaseAwareRanker"]
