"""Haystack types to and from phaseaware's, shared by the phaseaware components: nothing
here plans or decides (the kit, :mod:`phaseaware.integrate`, does)."""

from haystack_integrations.utils.phaseaware.convert import (
    document_records,
    message_dicts,
    with_text,
)
from haystack_integrations.utils.phaseaware.target import TARGET_KEYS, plain_target_args
from haystack_integrations.utils.phaseaware.template import (
    SLOT_VARIABLE,
    slot_template,
)

__all__ = [
    "SLOT_VARIABLE",
    "TARGET_KEYS",
    "document_records",
    "message_dicts",
    "plain_target_args",
    "slot_template",
    "with_text",
]
