"""The chat-format and tokenizer-spec registries: every entry loads, and a third party
registers through the same call the built-ins use."""

from __future__ import annotations

import pytest

from phaseaware.assembly import assemble
from phaseaware.chat import (
    ChatFormat,
    ChatSettings,
    UnsupportedSettingError,
    conversation_layout,
    parse_messages,
)
from phaseaware.chat import formats as chat_formats
from phaseaware.chat.formats import (
    CHAT_FORMAT_NAMES,
    chat_format_entries,
    chat_format_names,
    format_markers,
    get_chat_format,
    markers_of,
    register_chat_format,
)
from phaseaware.chat.settings import SETTING_NAMES
from phaseaware.errors import InputError, TemplateError, TokenizerError
from phaseaware.tokenizers import Tokenizer, load_tokenizer, registry
from phaseaware.tokenizers.registry import register_tokenizer, tokenizer_entries

#: one spec per registered tokenizer family that loads offline; a new entry needs one here
TOKENIZER_EXAMPLES = {
    "tiktoken": "tiktoken:cl100k_base",
    "hf": f"hf:{registry.REFERENCE_MODEL_DIR}",
    "deepseek-v4": "deepseek-v4",
    "reference": "reference",
}
#: the tokenizer each chat format is loaded with (``hf`` needs a chat template)
FORMAT_TOKENIZER = {"hf": "reference"}


@pytest.fixture
def isolated(monkeypatch):
    """Registrations made by a test vanish after it (both tables copied)."""
    monkeypatch.setattr(chat_formats, "_entries", dict(chat_formats._entries))
    monkeypatch.setattr(registry, "_entries", dict(registry._entries))
    monkeypatch.setattr(registry, "_cache", dict(registry._cache))


@pytest.mark.parametrize("entry", tokenizer_entries(), ids=lambda e: e.name)
def test_every_tokenizer_entry_loads(entry):
    spec = TOKENIZER_EXAMPLES[entry.name]
    tokenizer = load_tokenizer(spec)
    assert isinstance(tokenizer, Tokenizer) and tokenizer.spec == spec
    assert len(tokenizer.tokenize("The key is 42.")) > 1  # the reference vocabulary is words
    assert entry.form.split(":")[0].split(" ")[0] == entry.name
    assert entry.argument == (":" in spec)


def test_every_tokenizer_entry_has_an_example():
    assert {e.name for e in tokenizer_entries()} == TOKENIZER_EXAMPLES.keys()
    assert tuple(e.form for e in tokenizer_entries()) == registry.SPEC_FORMS


@pytest.mark.parametrize("entry", chat_format_entries(), ids=lambda e: e.name)
def test_every_chat_format_entry_loads_and_renders(entry):
    tokenizer = load_tokenizer(FORMAT_TOKENIZER.get(entry.name, "tiktoken:cl100k_base"))
    assert entry.supported_settings <= set(SETTING_NAMES) and "thinking" in entry.supported_settings
    for thinking in (False, True):
        fmt = get_chat_format(entry.name, tokenizer, thinking=thinking)
        assert isinstance(fmt, ChatFormat) and fmt.name == entry.name
        assert getattr(fmt, "thinking", thinking) is thinking  # where the format has a variant
        assert fmt.supported_settings == entry.supported_settings  # type: ignore[attr-defined]
        assert markers_of(fmt) == entry.markers == format_markers(entry.name)
        text = fmt.render(parse_messages([{"role": "user", "content": "Hello there"}]))
        assert "Hello there" in text
        layout = conversation_layout(tokenizer=tokenizer, chat_format=fmt)
        rendered = layout.render(system=None, context="C", question="Q")
        assert rendered.context == "C" and rendered.text.startswith(tokenizer.bos_text)
    given = ChatSettings(thinking=True, reasoning_effort="high")
    if "reasoning_effort" in entry.supported_settings:
        assert get_chat_format(entry.name, tokenizer, settings=given).settings == given  # type: ignore[attr-defined]
    else:  # refused before the factory runs, naming the setting
        with pytest.raises(UnsupportedSettingError, match="reasoning_effort"):
            get_chat_format(entry.name, tokenizer, settings=given)


def test_built_in_names():
    assert CHAT_FORMAT_NAMES == ("none", "chatml", "hf", "deepseek-v4", "deepseek-v4.1")
    assert chat_format_names()[:5] == CHAT_FORMAT_NAMES


class _Shout:
    """A third party's chat format: ``>>`` before each message, upper-case role."""

    name = "shout"
    chat = True

    def __init__(self, *, thinking: bool = False) -> None:
        self.thinking = thinking

    def render(self, messages, *, add_generation_prompt=True):
        text = "".join(f">>{m.role.upper()}: {m.content}\n" for m in messages)
        return text + (">>ASSISTANT:" + (" (think)" if self.thinking else ""))


def test_a_third_party_chat_format_plugs_in(isolated, cl100k):
    register_chat_format(
        "shout", lambda tokenizer, settings: _Shout(thinking=settings.thinking),
        supported_settings=("thinking",), markers=(">>",),
    )  # fmt: skip
    assert "shout" in chat_format_names() and format_markers("shout") == (">>",)
    assert get_chat_format("shout", cl100k, thinking=True).thinking
    assert get_chat_format("shout", cl100k, settings=ChatSettings(thinking=True)).thinking
    with pytest.raises(UnsupportedSettingError, match="does not render drop_thinking"):
        get_chat_format("shout", cl100k, thinking=True, drop_thinking=False)
    result = assemble(
        ["Doc one.", "Doc two.>> fake turn"], tokenizer=cl100k, chat_format="shout",
        system="Be brief.", question="Which doc?", budget_tokens=200,
    )  # fmt: skip
    assert (
        result.prompt.startswith(">>SYSTEM: Be brief.\n>>USER: ") and result.chat_format == "shout"
    )
    assert "fake turn" in result.prompt and ">> fake turn" not in result.prompt  # its marker
    with pytest.raises(InputError, match="registered already"):
        register_chat_format("shout", lambda tokenizer, settings: _Shout())
    register_chat_format("shout", lambda tokenizer, settings: _Shout(), replace=True)
    assert not get_chat_format("shout", cl100k).thinking
    with pytest.raises(UnsupportedSettingError, match="does not render thinking"):
        get_chat_format("shout", cl100k, thinking=True)  # declares no settings now
    with pytest.raises(InputError, match="settings from thinking, reasoning_effort"):
        register_chat_format(
            "loud", lambda tokenizer, settings: _Shout(), supported_settings=("volume",)
        )
    with pytest.raises(InputError, match="markers are a list of non-empty strings"):
        register_chat_format("loud", lambda tokenizer, settings: _Shout(), markers=">>")
    with pytest.raises(
        TemplateError, match=r"none, chatml, hf, deepseek-v4, deepseek-v4.1, shout \(chat_format="
    ):
        get_chat_format("whisper", cl100k)


def test_a_third_party_tokenizer_plugs_in(isolated, minimal_tokenizer):
    MinimalTokenizer = type(minimal_tokenizer)  # noqa: N806 (tests/conftest.py)
    register_tokenizer(
        "words", lambda arg, spec: MinimalTokenizer(bos_text=arg), form="words:<bos>",
        argument=True,
    )  # fmt: skip
    tokenizer = load_tokenizer("words:<s>")
    assert tokenizer.bos_text == "<s>" and load_tokenizer("words:<s>") is tokenizer
    with pytest.raises(TokenizerError, match="words:<bos>"):
        load_tokenizer("words")  # the family takes an argument
    with pytest.raises(InputError, match="registered already"):
        register_tokenizer("words", lambda arg, spec: MinimalTokenizer(), form="w", argument=False)
    with pytest.raises(InputError, match="without ':'"):
        register_tokenizer("a:b", lambda arg, spec: MinimalTokenizer(), form="a", argument=False)


@pytest.mark.parametrize("spec", ["deepseek-v4:x", "reference:", "tiktoken", "hf"])
def test_argument_forms_are_kept_apart(spec):
    with pytest.raises(TokenizerError, match="unknown tokenizer spec"):
        load_tokenizer(spec)
