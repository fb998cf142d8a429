"""phaseaware-haystack: the generator's reported prompt tokens checked against the plan."""

from haystack_integrations.components.validators.phaseaware.usage_check import (
    PhaseAwareUsageCheck,
)

__all__ = ["PhaseAwareUsageCheck"]
