"""No control token forms where untrusted pieces meet: a marker split across ``{question}``,
``{context}`` or a message boundary stays broken.

Every control string of a format (its markers, the tokenizer's BOS/EOS and special
strings) is cut at every character; the two pieces go on either side of a placeholder
or of a message boundary. The prompt must hold, for every control-token id, exactly
as many as the same conversation with every user string replaced by plain text (the
template's own), and so for each multi-token marker. Under ``control_tokens="refuse"``
the input is refused instead (``ControlTokenError``) or passes with the same counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware import AssemblyOptions, assemble, assemble_append
from phaseaware.chat import ChatSettings, conversation_layout, get_chat_format, parse_messages
from phaseaware.chat.deepseek_v4 import MARKERS as DEEPSEEK_MARKERS
from phaseaware.chat.formats import markers_of
from phaseaware.errors import ControlTokenError
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.tokenizers.control import ControlScanner, scanner_for
from tests.support.optional import SMOLLM2_GGUF, needs_smollm2
from tests.unit.chat.test_chat_properties import SMOLLM2, _v3_tokenizer


def assemble_conversation(messages: Any, chunks: Any, **kwargs: Any) -> Any:
    """A message-list assembly through the one public door."""
    return assemble(chunks, messages=messages, **kwargs)


FORMATS = ["deepseek-v4", "deepseek-v4.1", "chatml", "none", "hf"]
_TOKENIZERS: dict[str, Tokenizer] = {}

Messages = list[dict[str, Any]]
# (messages, question, chunk) from the two pieces of a control string
Case = Callable[[str, str], tuple[Messages, str, str]]


def _tokenizer(name: str) -> Tokenizer:
    key = {"hf": "hf", "chatml": "chatml"}.get(name, "deepseek-v4")
    if key not in _TOKENIZERS:
        if key == "hf":
            _TOKENIZERS[key] = _v3_tokenizer()
        elif key == "chatml":
            if SMOLLM2_GGUF is None:
                pytest.skip(needs_smollm2.kwargs["reason"])
            _TOKENIZERS[key] = load_tokenizer(SMOLLM2)
        else:
            _TOKENIZERS[key] = load_tokenizer("deepseek-v4")
    return _TOKENIZERS[key]


def _scanner(name: str, policy: str = "neutralize") -> ControlScanner:
    tok = _tokenizer(name)
    return scanner_for(tok, markers=markers_of(get_chat_format(name, tok)), policy=policy)


def _own_markers(name: str) -> list[str]:
    """The control strings a format writes itself, and the tokenizer's BOS/EOS (for
    ``none``, which writes no marker: DeepSeek's, special strings of its tokenizer)."""
    tok = _tokenizer(name)
    own = set(markers_of(get_chat_format(name, tok))) or set(DEEPSEEK_MARKERS)
    own |= {tok.bos_text, getattr(tok, "eos_text", "")}
    strings = _scanner(name).strings
    return sorted(s for s in own if s in strings)


CASES: dict[str, Case] = {
    "question after": lambda a, b: ([{"role": "user", "content": f"hi {a}{{question}}\n{{context}}"}], f"{b} ignore", "doc"),
    "question before": lambda a, b: ([{"role": "user", "content": f"{{question}}{b} x\n{{context}}"}], f"x {a}", "doc"),
    "empty question": lambda a, b: ([{"role": "user", "content": f"hi {a}{{question}}{b} go\n{{context}}"}], "", "doc"),
    "context after": lambda a, b: ([{"role": "user", "content": f"hi {a}{{context}}\n{{question}}"}], "q", f"{b} doc"),
    "context before": lambda a, b: ([{"role": "user", "content": f"{{question}}\n{{context}}{b} go"}], "q", f"doc {a}"),
    "question then context": lambda a, b: ([{"role": "user", "content": "x {question}{context} y"}], f"q {a}", f"{b} doc"),
    "message boundary": lambda a, b: ([{"role": "user", "content": f"x {a}"}, {"role": "assistant", "content": f"{b} y"}, {"role": "user", "content": "{context}\n{question}"}], "q", "doc"),
}  # fmt: skip
AT_SLOT = {"context after", "context before", "question then context"}  # pieces meet at {context}


def _plain(messages: Messages) -> Messages:
    return [{**m, "content": "x"} for m in messages]


def _assert_template_counts(name: str, prompt: str, messages: Messages) -> None:
    """Control ids (and multi-token markers) of ``prompt`` are those of the template."""
    tok = _tokenizer(name)
    string_arguments = ChatSettings(tool_arguments="string")  # the V3 template's form
    fmt = get_chat_format(name, tok, settings=string_arguments if name == "hf" else None)
    plain = fmt.render(parse_messages(_plain(messages)))
    scanner = _scanner(name)
    ids = scanner.ids(tok)
    got = [t for t in tok.encode(prompt) if t in ids]
    want = [t for t in tok.encode(plain) if t in ids]
    assert sorted(got) == sorted(want), (prompt, plain)
    assert scanner.count(prompt) == scanner.count(plain), (prompt, plain)
    for marker in markers_of(fmt):
        assert prompt.count(marker) == plain.count(marker), marker


def _render(name: str, messages: Messages, question: str, chunk: str, policy: str) -> str:
    tok = _tokenizer(name)
    layout = conversation_layout(
        tokenizer=tok, chat_format=name, messages=messages, control_tokens=policy
    )
    return layout.render(system=None, context=chunk, question=question).text


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_every_own_marker_split_at_every_character(name, case):
    """Exhaustive over the format's own markers, BOS and EOS: every cut, every place."""
    for marker in _own_markers(name):
        for k in range(1, len(marker)):
            messages, question, chunk = CASES[case](marker[:k], marker[k:])
            prompt = _render(name, messages, question, chunk, "neutralize")
            _assert_template_counts(name, prompt, messages)
            try:
                refused = _render(name, messages, question, chunk, "refuse")
            except ControlTokenError:
                continue
            if case in AT_SLOT:  # refused when the assembled prompt is checked
                continue
            _assert_template_counts(name, refused, messages)


@st.composite
def _cut(draw: st.DrawFn, name: str) -> tuple[str, str]:
    strings = sorted(_scanner(name).strings)
    marker = draw(st.sampled_from(strings))
    k = draw(st.integers(1, len(marker) - 1))
    return marker[:k], marker[k:]


@pytest.mark.parametrize("name", FORMATS)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_control_string_split_across_an_assembly(name, data):
    """Any control string of the tokenizer or format, cut anywhere, through ``assemble``."""
    a, b = data.draw(_cut(name))
    case = data.draw(st.sampled_from(sorted(CASES)))
    policy = data.draw(st.sampled_from(["neutralize", "refuse"]))
    messages, question, chunk = CASES[case](a, b)

    try:
        result = assemble_conversation(
            messages, [chunk], tokenizer=_tokenizer(name), chat_format=name, question=question,
            budget_tokens=2000, options=AssemblyOptions(control_tokens=policy),
        )  # fmt: skip
    except ControlTokenError:
        assert policy == "refuse"
        return
    _assert_template_counts(name, result.prompt, messages)


APPEND_FORMATS = ["deepseek-v4", "chatml", "hf"]


@pytest.mark.parametrize("name", APPEND_FORMATS)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_split_inside_an_appended_tool_result(name, data):
    """``assemble_append``: the new tool message with a control string cut at ``{question}``."""
    a, b = data.draw(_cut(name))
    call = {"id": "c1", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    sent = [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
    ]
    new = {"role": "tool", "tool_call_id": "c1", "content": f"Result {a}{{question}}\n{{context}}"}
    # the DeepSeek-V3 template writes arguments as text: hand them over as llama-cpp-python does
    settings = ChatSettings(tool_arguments="string") if name == "hf" else None
    result = assemble_append(
        sent=sent, new=new, chunks=["doc"], tokenizer=_tokenizer(name), chat_format=name,
        question=f"{b} ignore", budget_tokens=2000, settings=settings,
    )  # fmt: skip
    assert result.neutralized, "the joined control string is listed"
    _assert_template_counts(name, result.prompt, [*sent, new])
