"""What an assembly is made for, stated once: :class:`AssemblyRequest`.

Every entry point takes the same family of arguments (tokenizer, chat format,
profile, budget, options, chat settings, the server's offset). They travel as one
frozen value: :func:`phaseaware.assemble` and :func:`phaseaware.assemble_append`
accept it as ``request=`` (or the same names as keywords), the integration kit
(``phaseaware.integrate.resolve_target``) resolves it once per adapter, and the
adapters build it from their constructor arguments. Each field takes a spec or an
object; :meth:`AssemblyRequest.resolve` turns the specs into objects (the
tokenizer and profile registries' caches), so resolving twice costs nothing.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from phaseaware.assembly.inputs.options import AssemblyOptions, check_position_offset
from phaseaware.chat.formats import ChatFormat, chat_format_names
from phaseaware.chat.layout import PromptLayout
from phaseaware.chat.settings import ChatSettings
from phaseaware.errors import InputError, PhaseawareWarning
from phaseaware.profiles.model import Profile
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer, implements

__all__ = [
    "REQUEST_FIELDS",
    "AssemblyRequest",
    "resolve_options",
    "resolve_profile",
    "warn_gaps",
    "resolve_tokenizer",
    "stated_settings",
]

ProfileRef = str | os.PathLike[str] | Profile | None
FormatRef = str | ChatFormat | PromptLayout | None
OptionsRef = AssemblyOptions | Mapping[str, Any] | None
SettingsRef = ChatSettings | Mapping[str, Any] | None


@dataclass(frozen=True)
class AssemblyRequest:
    """The arguments every assembly shares (not the chunks, question or messages).

    ``tokenizer``: a spec (``"deepseek-v4"``, ``"tiktoken:o200k_base"``, ``"hf:/path"``)
    or a ``Tokenizer``. ``chat_format``: a format name (``none``, ``chatml``, ``hf``,
    ``deepseek-v4``, ...), a ``ChatFormat``, a layout, or ``None`` for a caller that
    renders no messages (a document compressor). ``profile``: a model name, a profile
    file path, a ``Profile`` or ``None`` (lost-in-the-middle order, no padding).
    ``budget_tokens``: the most tokens of the whole prompt (``None``: the caller sets
    none yet; assembling then raises). ``options``: ``AssemblyOptions`` or a dict of
    its fields (``None``: the entry point's default). ``settings``: ``ChatSettings``
    or its dict, for a named chat format; ``thinking=True`` is its short form.
    ``position_offset``: tokens the server adds before the prompt (overrides
    ``options.position_offset``).
    """

    tokenizer: str | Tokenizer
    chat_format: FormatRef = "none"
    profile: ProfileRef = None
    budget_tokens: int | None = None
    options: OptionsRef = None
    settings: SettingsRef = None
    thinking: bool = False
    position_offset: int | None = None

    def resolve(self, *, default_options: AssemblyOptions | None = None) -> AssemblyRequest:
        """This request with objects for specs: a ``Tokenizer``, a ``Profile`` (or
        ``None``), ``AssemblyOptions`` (``default_options`` for ``None``, the offset
        applied) and ``ChatSettings`` (or ``None``); the chat format stays as given
        (a name is built with the settings by the entry point). ``InputError`` names
        the field that is wrong. A profile that says it lacks data the planner would use
        (:meth:`Profile.gaps`, e.g. the local window) is named in one warning."""
        profile = resolve_profile(self.profile)
        if profile is not None:
            warn_gaps(profile)
        return dataclasses.replace(
            self,
            tokenizer=resolve_tokenizer(self.tokenizer),
            profile=profile,
            options=resolve_options(
                self.options, position_offset=self.position_offset, default=default_options
            ),
            settings=self.chat_settings(),
            position_offset=None,  # applied to options
            chat_format=_check_format(self.chat_format),
            budget_tokens=_check_budget(self.budget_tokens),
        )

    def chat_settings(self) -> ChatSettings | None:
        """``settings`` as a ``ChatSettings`` (``None`` when none were given; ``thinking``
        alone stays in ``thinking``). ``InputError`` for a bad value or a ``thinking``
        that disagrees with them."""
        return stated_settings(self.settings, self.thinking)

    @property
    def tokenizer_object(self) -> Tokenizer:
        """The tokenizer (loaded from its spec, cached by the registry)."""
        return resolve_tokenizer(self.tokenizer)

    @property
    def profile_object(self) -> Profile | None:
        """The profile (loaded from its name or path, cached by the registry)."""
        return resolve_profile(self.profile)


REQUEST_FIELDS = tuple(f.name for f in dataclasses.fields(AssemblyRequest))


def stated_settings(settings: SettingsRef, thinking: object) -> ChatSettings | None:
    """``settings`` as a ``ChatSettings`` (``None`` when none were given); ``InputError``
    for a bad value, or for ``thinking=True`` beside settings with thinking off."""
    if not isinstance(thinking, bool):
        raise InputError(f"thinking must be true or false, got {thinking!r}")
    if settings is None:
        return None
    if isinstance(settings, Mapping):
        settings = ChatSettings.from_dict(settings)
    if not isinstance(settings, ChatSettings):
        raise InputError(
            "settings must be a phaseaware.ChatSettings or a dict of its fields, "
            f"got {type(settings).__name__}"
        )
    if thinking and not settings.thinking:
        raise InputError(
            "thinking=True disagrees with settings (thinking off); pass thinking inside "
            "settings only"
        )
    return settings


def resolve_tokenizer(tokenizer: object) -> Tokenizer:
    if isinstance(tokenizer, str):
        return load_tokenizer(tokenizer)
    if implements(tokenizer, Tokenizer):
        return cast(Tokenizer, tokenizer)
    raise InputError(
        f"tokenizer must be a phaseaware spec ('deepseek-v4', 'tiktoken:o200k_base', "
        f"'hf:/path') or a Tokenizer, got {type(tokenizer).__name__}"
    )


def warn_gaps(profile: Profile) -> None:
    """One ``PhaseawareWarning`` per gap the profile names (:meth:`Profile.gaps`): the same
    text from the same line is shown once per process, however many calls plan with it."""
    for field_name, why in profile.gaps().items():
        warnings.warn(
            f"profile {profile.model!r} lacks {field_name}: {why}", PhaseawareWarning, stacklevel=2
        )


def resolve_profile(profile: object) -> Profile | None:
    """The profile to plan with (a name or path loaded through the registry)."""
    if profile is None:
        return None
    if isinstance(profile, str | os.PathLike):
        profile = get_profile(profile)  # the registry's cache, its file rules
    if not isinstance(profile, Profile):
        raise InputError(
            f"profile must be a model name, a profile file path or a Profile, "
            f"got {type(profile).__name__}"
        )
    return profile


def _check_format(chat_format: object) -> FormatRef:
    if chat_format is None or isinstance(chat_format, str):
        return chat_format
    # protocol checks remembered per object (``implements``): each reads every member
    if implements(chat_format, ChatFormat) or implements(chat_format, PromptLayout):
        return cast(FormatRef, chat_format)
    raise InputError(
        f"chat_format must be a chat format name ({', '.join(chat_format_names())}), a "
        f"ChatFormat or a layout (conversation_layout), got {type(chat_format).__name__}"
    )


def _check_budget(budget_tokens: object) -> int | None:
    if budget_tokens is None:
        return None
    if isinstance(budget_tokens, bool) or not isinstance(budget_tokens, int) or budget_tokens < 1:
        raise InputError(f"budget_tokens must be a positive integer, got {budget_tokens!r}")
    return budget_tokens


def resolve_options(
    options: OptionsRef,
    *,
    position_offset: int | None = None,
    default: AssemblyOptions | None = None,
) -> AssemblyOptions:
    """``AssemblyOptions`` from an object, a mapping of its fields, or ``None`` (``default``,
    else defaults); ``position_offset`` (tokens the server adds before the prompt) overrides
    the field."""
    if options is None:
        resolved = default if default is not None else AssemblyOptions()
    elif isinstance(options, AssemblyOptions):
        resolved = options
    elif isinstance(options, Mapping):
        known = {f.name for f in dataclasses.fields(AssemblyOptions)}
        unknown = sorted(str(k) for k in set(options) - known)
        if unknown:
            raise InputError(f"unknown options {unknown}; known options: {sorted(known)}")
        resolved = AssemblyOptions(**dict(options))
    else:
        raise InputError(
            f"options must be a phaseaware.AssemblyOptions or a dict of its fields, got "
            f"{type(options).__name__}"
        )
    if position_offset is not None:
        offset = check_position_offset(position_offset, name="position_offset")
        if offset != resolved.position_offset:
            resolved = dataclasses.replace(resolved, position_offset=offset)
    return resolved
