"""``PhaseAwareUsageCheck``: the server's prompt token count against the messages sent."""

from __future__ import annotations

from typing import Any, Literal

from haystack import component, default_from_dict, default_to_dict
from haystack.dataclasses import ChatMessage
from haystack_integrations.utils.phaseaware import message_dicts, plain_target_args

import phaseaware.integrate as kit

__all__ = ["PhaseAwareUsageCheck"]


@component
class PhaseAwareUsageCheck:
    """After ``OpenAIChatGenerator``: compares ``replies[0].meta["usage"]["prompt_tokens"]``
    with ``messages`` (the builder's ``prompt``) rendered by ``chat_format`` and counted by
    ``tokenizer``, plus the endpoint's offset (:func:`phaseaware.integrate.check_usage`).
    ``on_mismatch``: ``"warn"`` (a ``PhaseawareWarning``), ``"raise"``
    (``PromptTokenDriftError``) or ``"ignore"``. Outputs ``replies`` unchanged and
    ``usage_check`` (``planned_tokens``, ``offset``, ``reported_tokens``, ``drift``, ``ok``;
    ``None`` when the server reported no usage). The tokenizer loads in :meth:`warm_up`."""

    def __init__(
        self,
        *,
        tokenizer: str | kit.Tokenizer,
        chat_format: str,
        position_offset: int | None = None,
        endpoint: str | dict[str, Any] | None = None,
        on_mismatch: Literal["warn", "raise", "ignore"] = "warn",
        thinking: bool = False,
        settings: dict[str, Any] | None = None,
        state_settings: bool = True,
    ) -> None:
        self.on_mismatch = kit.check_on_mismatch(on_mismatch)
        self._target_args: dict[str, Any] = {
            "tokenizer": tokenizer, "chat_format": chat_format,
            "position_offset": position_offset, "endpoint": endpoint, "thinking": thinking,
            "settings": settings, "state_settings": state_settings,
        }  # fmt: skip
        self._target: kit.Target | None = None

    def warm_up(self) -> None:
        """Load the tokenizer, chat format and endpoint record (once)."""
        if self._target is None:
            args = dict(self._target_args)
            endpoint, state = args.pop("endpoint"), args.pop("state_settings")
            request = kit.AssemblyRequest(**args)
            self._target = kit.resolve_target(request, endpoint=endpoint, state_settings=state)

    @component.output_types(replies=list[ChatMessage], usage_check=dict[str, Any] | None)
    def run(self, replies: list[ChatMessage], messages: list[ChatMessage]) -> dict[str, Any]:
        """Check the first reply's reported prompt tokens against ``messages``."""
        self.warm_up()
        assert self._target is not None  # noqa: S101 (warm_up sets it)
        meta = replies[0].meta if replies else {}
        model, fingerprint = kit.reported_identity(meta)
        check = kit.check_usage(
            self._target, planned_tokens=kit.rendered_tokens(self._target, message_dicts(messages)),
            reported_tokens=kit.reported_prompt_tokens(meta), on_mismatch=self.on_mismatch,
            served_model=model, system_fingerprint=fingerprint,
        )  # fmt: skip
        usage = None
        if check is not None:
            usage = {
                "planned_tokens": check.planned_tokens, "offset": check.offset,
                "reported_tokens": check.reported_tokens, "drift": check.drift, "ok": check.ok,
            }  # fmt: skip
        return {"replies": replies, "usage_check": usage}

    @component.output_types(replies=list[ChatMessage], usage_check=dict[str, Any] | None)
    async def run_async(
        self, replies: list[ChatMessage], messages: list[ChatMessage]
    ) -> dict[str, Any]:
        """:meth:`run`, inline (one render and encode of the sent messages)."""
        return self.run(replies, messages)

    def to_dict(self) -> dict[str, Any]:
        """The component's init parameters."""
        return default_to_dict(
            self, on_mismatch=self.on_mismatch, **plain_target_args(self._target_args)
        )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PhaseAwareUsageCheck:
        """The component :meth:`to_dict` wrote."""
        return default_from_dict(cls, data)
