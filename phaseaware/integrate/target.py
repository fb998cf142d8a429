"""The target of an adapter: tokenizer, chat format, profile, options and endpoint, once.

:func:`resolve_target` is the one place a framework adapter turns its constructor
arguments into phaseaware objects; the result is a frozen :class:`Target`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from phaseaware.assembly.inputs.options import AssemblyOptions, check_position_offset
from phaseaware.assembly.inputs.request import (
    AssemblyRequest,
    resolve_options,
    resolve_tokenizer,
    stated_settings,
)
from phaseaware.chat.formats import (
    CHAT_FORMAT_NAMES,
    ChatFormat,
    format_settings,
    get_chat_format,
)
from phaseaware.chat.layout import PromptLayout
from phaseaware.chat.settings import ChatSettings, ChatSettingsError, UnsupportedSettingError
from phaseaware.endpoints import (
    PROMPT_IDS_FIELDS,
    PROMPT_IDS_NOT_STREAMED,
    EndpointRecord,
    EndpointRef,
    endpoint_options,
    load_endpoint,
)
from phaseaware.endpoints import usage_offsets as _usage_offsets
from phaseaware.endpoints.request_settings import SETTINGS_FREE_FORMATS, record_settings
from phaseaware.errors import InputError
from phaseaware.profiles.model import Profile
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "APPEND_OPTIONS",
    "Target",
    "call_effort",
    "record_settings",
    "resolve_options",
    "resolve_settings",
    "resolve_target",
]

APPEND_OPTIONS = AssemblyOptions(repeat=False)  # the core's append default (nothing restated)


@dataclass(frozen=True)
class Target:
    """Everything an assembly needs besides its records, question and conversation.

    ``options``: for one-call assembly (``assemble``), the endpoint record's offset
    (or offset set) applied. ``append_options``: the same for append alignment, whose
    default (no ``options`` given) is the core's, ``AssemblyOptions(repeat=False)``.
    ``chat_format`` is ``None`` for a caller that renders no messages (a compressor).
    ``settings``: the chat settings the plan is made with (see :func:`resolve_target`
    for the rule), ``None`` for a ``ChatFormat`` object the caller built that carries
    none. ``state_settings``: whether the requests state them (:meth:`request_kwargs`);
    ``False`` when the server's default renders them (the endpoint record's
    ``server_default``).
    """

    tokenizer: Tokenizer
    chat_format: ChatFormat | None
    profile: Profile | None
    options: AssemblyOptions
    append_options: AssemblyOptions
    endpoint: EndpointRecord | None = None
    budget_tokens: int | None = None
    settings: ChatSettings | None = None
    state_settings: bool = True

    def chat_template_kwargs(self) -> dict[str, Any] | None:
        """The ``chat_template_kwargs`` a request states so a vLLM/SGLang server renders
        what the plan rendered; ``None`` when the requests state nothing (the server's
        default renders them, or the format has no options: ``none``, ``chatml``)."""
        fmt = self.chat_format
        if not self.state_settings or fmt is None or self.settings is None:
            return None
        if fmt.name in SETTINGS_FREE_FORMATS:
            return None
        return self.settings.chat_template_kwargs(fmt.name) or None

    @property
    def prompt_ids_field(self) -> str | None:
        """The request field that makes the endpoint's server return the prompt's token ids
        (vLLM ``return_token_ids``, SGLang ``return_prompt_token_ids``), from the endpoint
        record's server; ``None``: unknown, or no record."""
        return PROMPT_IDS_FIELDS.get(self._server_name)

    @property
    def _server_name(self) -> str:
        server = self.endpoint.server if self.endpoint is not None else None
        return server.split(" ", 1)[0].lower() if server else ""

    def asks_prompt_ids(self, *, may_stream: bool) -> bool:
        """Whether a call asks for the prompt's ids: the server returns them
        (:attr:`prompt_ids_field`) and, for a call that may stream, also accepts the field
        there (vLLM does; SGLang refuses it: ``PROMPT_IDS_NOT_STREAMED``)."""
        return not self.prompt_ids_unasked(may_stream=may_stream)

    def prompt_ids_unasked(self, *, may_stream: bool) -> str:
        """Why a call cannot ask for the prompt's ids, in words for a count-only check's
        ``count_only_reason`` (``""``: it can, :meth:`asks_prompt_ids`)."""
        server, field = self._server_name, self.prompt_ids_field
        if field is None:
            named = f"names {server}, which" if server else "names no server that"
            return f"the endpoint record {named} returns no prompt ids (vLLM and SGLang do)"
        if may_stream and server in PROMPT_IDS_NOT_STREAMED:
            return f"{server} refuses {field} on a streamed request, so no ids were asked for"
        return ""

    def request_kwargs(self, *, prompt_ids: bool = False) -> dict[str, Any]:
        """Keyword arguments for an OpenAI-compatible client call (``openai``,
        ``ChatOpenAI.bind``, LlamaIndex ``OpenAILike.chat``):
        ``{"extra_body": {"chat_template_kwargs": {...}}}``, or ``{}`` when there is
        nothing to state (so OpenAI's own API, which rejects unknown fields, gets none).
        ``prompt_ids``: also ask for the prompt's ids where the server returns them
        (:attr:`prompt_ids_field`; not for streaming: SGLang refuses it there)."""
        body: dict[str, Any] = {}
        kwargs = self.chat_template_kwargs()
        if kwargs is not None:
            body["chat_template_kwargs"] = kwargs
        field = self.prompt_ids_field if prompt_ids else None
        if field is not None:
            body[field] = True
        return {"extra_body": body} if body else {}

    def merged_kwargs(
        self, existing: Mapping[str, Any] | None, *, fix: str = "", prompt_ids: bool = False
    ) -> dict[str, Any]:
        """``existing`` call kwargs (a framework's model settings) with
        :meth:`request_kwargs` merged into their ``extra_body``; a copy, the caller's
        mapping is not changed. ``chat_template_kwargs`` already there that disagree with
        the plan's are refused (``UnsupportedSettingError``; ``fix`` is added)."""
        merged = dict(existing or {})
        field = self.prompt_ids_field if prompt_ids else None
        if field is not None:
            extra = merged.get("extra_body")
            merged["extra_body"] = {**(extra if isinstance(extra, Mapping) else {}), field: True}
        ours = self.chat_template_kwargs()
        if ours is None:
            return merged
        body = merged.get("extra_body")
        body = dict(body) if isinstance(body, Mapping) else {}
        stated = body.get("chat_template_kwargs")
        if isinstance(stated, Mapping):
            clash = sorted(k for k in stated if k in ours and stated[k] != ours[k])
            if clash:
                raise UnsupportedSettingError(
                    f"the model call states chat_template_kwargs {dict(stated)!r}, but the "
                    f"plan was made with {ours!r} (differs in {', '.join(clash)}); pass the "
                    f"chat settings to the phaseaware adapter (settings=, thinking=) and not "
                    f"to the model{fix}"
                )
            ours = {**stated, **ours}
        body["chat_template_kwargs"] = ours
        merged["extra_body"] = body
        return merged

    def with_tools(self, tools: Sequence[Mapping[str, Any]], *, fix: str = "") -> Target:
        """This target with ``tools`` (OpenAI tool schemas, as the request sends them) in
        the chat format's settings, so the plan renders them as the server does.

        A format that does not render tools refuses them (``UnsupportedSettingError``:
        use ``deepseek-v4``/``deepseek-v4.1``, or send no tools); ``fix`` is added to the
        message (the adapter's own way out). No tools: this target.
        """
        if not tools:
            return self
        fmt = self.require_format()
        if self.settings is None:
            raise UnsupportedSettingError(
                f"the chat format was passed as an object ({fmt!r}), so tools cannot be added "
                f"to its settings; pass chat_format by name{fix}"
            )
        settings = dataclasses.replace(self.settings, tools=tuple(tools))
        try:
            rendered = get_chat_format(fmt.name, self.tokenizer, settings=settings)
        except UnsupportedSettingError as exc:
            raise UnsupportedSettingError(f"{exc}{fix}") from None
        return dataclasses.replace(self, chat_format=rendered, settings=settings)

    def with_effort(self, effort: object, *, fix: str = "") -> Target:
        """This target planned with a model call's own ``reasoning_effort`` (bound to the
        chat model or passed on the call; :func:`call_effort` reads it): the plan renders
        it, and :meth:`chat_template_kwargs` states it beside the call's own field, so a
        server renders it whichever it reads (vLLM: the field; SGLang: the kwargs').
        ``None``, the plan's own effort, or a format that renders no effort: this target.
        Refused (``UnsupportedSettingError`` + ``fix``) when the plan cannot take it: no
        stated settings, or a value the server refuses."""
        settings, fmt = self.settings, self.chat_format
        if effort is None or fmt is None or (settings and effort == settings.reasoning_effort):
            return self
        if "reasoning_effort" not in format_settings(fmt.name):
            return self  # the format renders no effort (the server writes none either)
        if settings is None or not self.state_settings:
            raise UnsupportedSettingError(
                f"the model call sets reasoning_effort={effort!r}, but the plan's chat "
                f"settings are not stated with the request; pass the effort to the phaseaware "
                f"adapter (settings=ChatSettings(reasoning_effort={effort!r})) and not to the "
                f"model{fix}"
            )
        try:
            stated = dataclasses.replace(settings, reasoning_effort=effort)  # type: ignore[arg-type]
            rendered = get_chat_format(fmt.name, self.tokenizer, settings=stated)
        except ChatSettingsError as exc:
            raise UnsupportedSettingError(
                f"the model call sets reasoning_effort={effort!r}, which the plan cannot take "
                f"({exc}); set another on the model, or pass settings=ChatSettings("
                f"reasoning_effort=...) to the phaseaware adapter{fix}"
            ) from None
        return dataclasses.replace(self, chat_format=rendered, settings=stated)

    @property
    def usage_offsets(self) -> tuple[int, tuple[int, ...] | None]:
        """``(offset, offsets)`` the usage check expects (any of ``offsets`` when varying)."""
        return _usage_offsets(self.options)

    def check_offset(self, offset: int | None, *, name: str) -> int | None:
        """``offset`` (a caller's explicit offset for the usage check) if it agrees with the
        endpoint record, else ``InputError`` naming ``name``; ``None`` passes."""
        if offset is None:
            return None
        offset = check_position_offset(offset, name=name)
        record = self.endpoint
        if record is not None:
            known = record.offsets if record.stability == "varying" else (record.offset,)
            if (offset,) != tuple(known):
                raise InputError(
                    f"{name}={offset} disagrees with the endpoint record for {record.model!r} "
                    f"at {record.base_url} (offsets {list(known)}, {record.stability}); pass "
                    "only the endpoint record"
                )
        return offset

    def after_prefix(self, prefix_tokens: int) -> Target:
        """This target for a prompt that starts ``prefix_tokens`` tokens after the server's
        offset (a caller that knows only the count of the text before its documents): the
        offset, or each offset of a varying endpoint, grows by that count."""
        extra = check_position_offset(prefix_tokens, name="prefix_tokens")
        options = self.options
        if options.offsets:
            offsets = tuple(d + extra for d in options.offsets)
            options = dataclasses.replace(options, position_offset=0, offsets=offsets)
        else:
            options = dataclasses.replace(options, position_offset=options.position_offset + extra)
        return dataclasses.replace(self, options=options)

    def plan_key(self, messages: Sequence[Mapping[str, Any]], question: str) -> str:
        """A digest of what decides a prompt besides its records (same key: same frame), for
        adapters that check a plan made earlier still holds."""
        fmt = self.require_format()
        doc = {
            "tokenizer": self.tokenizer.spec,
            "fingerprint": self.tokenizer.fingerprint(),
            "chat_format": fmt.name,
            "format": repr(fmt),  # its settings included
            "messages": [dict(m) for m in messages],
            "question": question,
            "profile": self.profile.model if self.profile is not None else None,
            "budget_tokens": self.budget_tokens,
            "options": repr(self.options),
        }
        return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()

    def request(
        self, *, layout: ChatFormat | PromptLayout | None = None, append: bool = False
    ) -> AssemblyRequest:
        """The :class:`~phaseaware.AssemblyRequest` of one call, as objects: ``layout`` (the
        call's conversation) or the target's chat format, and the one-call options, or the
        append options for ``append=True`` (the endpoint's offset applied to both)."""
        return AssemblyRequest(
            tokenizer=self.tokenizer,
            chat_format=layout if layout is not None else self.require_format(),
            profile=self.profile,
            budget_tokens=self.require_budget(),
            options=self.append_options if append else self.options,
        )

    def require_format(self) -> ChatFormat:
        if self.chat_format is None:
            raise InputError("this call renders messages: pass chat_format= to the adapter")
        return self.chat_format

    def require_budget(self) -> int:
        if self.budget_tokens is None:
            raise InputError("this call assembles a prompt: pass budget_tokens= to the adapter")
        return self.budget_tokens


def call_effort(kwargs: Mapping[str, Any] | None, *models: object) -> object:
    """The ``reasoning_effort`` a model call sends: its own keyword (``kwargs``, or their
    ``extra_body``), else the first of ``models`` (the chat model, its bound keywords,
    its ``additional_kwargs``/``model_kwargs``) that sets one; ``None`` when none does."""
    body = (kwargs or {}).get("extra_body")
    for source in (kwargs or {}, body if isinstance(body, Mapping) else {}):
        if source.get("reasoning_effort") is not None:
            return source["reasoning_effort"]
    for model in models:
        for name in ("kwargs", "additional_kwargs", "model_kwargs"):
            bound = getattr(model, name, None)
            if isinstance(bound, Mapping) and bound.get("reasoning_effort") is not None:
                return bound["reasoning_effort"]
        own = getattr(model, "reasoning_effort", None)
        if own is not None:
            return own
    return None


def resolve_target(
    request: AssemblyRequest,
    *,
    endpoint: EndpointRef = None,
    state_settings: bool = True,
    default_options: AssemblyOptions | None = None,
) -> Target:
    """Resolve an adapter's :class:`~phaseaware.AssemblyRequest` once (see :class:`Target`).

    The chat settings the plan is made with (:func:`resolve_settings`): the request's
    ``settings`` (or ``thinking=True``) when given; else, with an endpoint record, the
    record's ``thinking`` when the requests state their settings (``state_settings=True``,
    the default: :meth:`Target.request_kwargs`), or the record's ``server_default`` when
    they do not (``state_settings=False``: the server's default renders the prompt).

    ``endpoint`` (an ``EndpointRecord``, a record path or ``{"base_url", "model"}``)
    sets the offset (constant record) or the offset set (varying: robust placement);
    ``FingerprintMismatchError`` for a record of another tokenizer, ``InputError``
    for an explicit offset that disagrees with it. ``default_options``: what
    ``options=None`` means for this adapter (default ``AssemblyOptions()``).
    """
    if not isinstance(request, AssemblyRequest):
        raise InputError(
            f"resolve_target takes a phaseaware.AssemblyRequest, got {type(request).__name__}"
        )
    tok = resolve_tokenizer(request.tokenizer)
    record = load_endpoint(endpoint)
    chosen = resolve_settings(
        settings=request.settings, thinking=request.thinking, endpoint=record,
        state_settings=state_settings,
    )  # fmt: skip
    fmt = _chat_format(request.chat_format, tok, chosen)
    one = resolve_options(
        request.options, position_offset=request.position_offset, default=default_options
    )
    append = resolve_options(
        request.options, position_offset=request.position_offset, default=APPEND_OPTIONS
    )
    resolved = request.resolve(default_options=default_options)
    return Target(
        tokenizer=tok,
        chat_format=fmt,
        settings=chosen if isinstance(request.chat_format, str) else _own_settings(fmt),
        state_settings=bool(state_settings),
        profile=resolved.profile_object,
        options=endpoint_options(one, record, tok),
        append_options=endpoint_options(append, record, tok),
        endpoint=record,
        budget_tokens=resolved.budget_tokens,
    )


def _chat_format(chat_format: object, tok: Tokenizer, settings: ChatSettings) -> ChatFormat | None:
    if chat_format is None or isinstance(chat_format, ChatFormat):
        return chat_format
    if isinstance(chat_format, str):
        return get_chat_format(chat_format, tok, settings=settings)
    raise InputError(
        f"chat_format must be a name ({', '.join(CHAT_FORMAT_NAMES)}) or a ChatFormat, "
        f"got {type(chat_format).__name__}"
    )


def _own_settings(fmt: ChatFormat | None) -> ChatSettings | None:
    """The settings a caller-built format carries (DeepSeek formats), else ``None``."""
    own = getattr(fmt, "settings", None)
    return own if isinstance(own, ChatSettings) else None


def resolve_settings(
    *,
    settings: ChatSettings | Mapping[str, Any] | None = None,
    thinking: bool = False,
    endpoint: EndpointRecord | None = None,
    state_settings: bool = True,
) -> ChatSettings:
    """The chat settings a plan is made with: explicit ``settings`` (a ``ChatSettings`` or
    its JSON) win, then ``thinking=True``; else the endpoint record's
    (:func:`record_settings`); else ``ChatSettings()`` (thinking off)."""
    if not isinstance(state_settings, bool):
        raise InputError(f"state_settings must be true or false, got {state_settings!r}")
    stated = stated_settings(settings, thinking)
    if stated is not None:
        return stated
    if thinking:
        return ChatSettings(thinking=True)
    if endpoint is not None:
        return record_settings(endpoint, state_settings=state_settings)
    return ChatSettings()
