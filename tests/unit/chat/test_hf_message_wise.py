"""``hf`` renders incrementally only where the template is proven message-wise, and then
gives the whole render's bytes.

- the proof (:func:`message_wise`) over real and hand-written templates: what it accepts
  and what it refuses (lookbehind, lookahead, namespaces, stateful calls, a closing that
  writes without the generation prompt, ...);
- random growing conversations (tool calls, tool results, system messages, edits of
  earlier messages, both generation-prompt settings): the render with kept renders
  equals the render after every kept render is dropped, for proven templates and for
  refused ones (whole renders);
- a step renders the new messages and the first one only; an error in a new message is
  raised by the whole render, with the conversation's own index.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.chat import hf
from phaseaware.chat.errors import TemplateRewriteError
from phaseaware.chat.formats import get_chat_format
from phaseaware.chat.hf_message_wise import message_wise
from phaseaware.chat.messages import Message, ToolCall
from phaseaware.errors import PhaseawareError
from phaseaware.tokenizers import hf_template
from tests.support.smollm2 import template
from tests.support.templated import deepseek_with_template

pytest.importorskip("transformers")

LOOP = "{% for m in messages %}"
CHATML_BODY = "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
PROMPT = "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
CHATML = LOOP + CHATML_BODY + "{% endfor %}" + PROMPT
# ChatML that writes tool calls (an inner loop with its own loop.first), a system default
# before a first non-system message, and constant text after the prompt block
TOOLS_CHATML = (
    "{{ bos_token }}{% if messages[0]['role'] != 'system' %}<|im_start|>system\nDefault."
    "<|im_end|>\n{% endif %}" + LOOP + "{% set body = m['content'] %}<|im_start|>"
    "{{ m['role'] }}\n{{ body }}{% if m['tool_calls'] is defined %}"
    "{% for call in m['tool_calls'] %}{% if not loop.first %},{% endif %}<tool_call>"
    "{{ call['function']['name'] }} {{ call['function']['arguments'] }}</tool_call>"
    "{% endfor %}{% endif %}{% if loop.first %} (first){% endif %}<|im_end|>\n{% endfor %}"
    + PROMPT
    + "{{ '<end>' }}"
)


@pytest.mark.parametrize(
    "source, closing",
    [
        (template("smollm2"), ""),
        (CHATML, ""),
        (TOOLS_CHATML, "<end>"),
        (CHATML + "\n</s>", "</s>"),  # trim_blocks (as transformers renders) eats the "\n"
        ("{% set sep = '\n' %}" + LOOP + "{{ m['content'] | trim }}{{ sep }}{% endfor %}", ""),
    ],
)
def test_message_wise_templates_are_proven(source: str, closing: str) -> None:
    assert message_wise(source) == closing


@pytest.mark.parametrize(
    "source",
    [
        pytest.param(template("qwen2_5"), id="qwen2.5: messages[loop.index0 + 1], loop.last"),
        pytest.param(template("deepseek_v3"), id="deepseek-v3: a namespace"),
        pytest.param(LOOP + "{{ m['content'] }}{% if not loop.last %}\n{% endif %}{% endfor %}",
                     id="loop.last"),
        pytest.param(LOOP + "{{ loop.index0 }}{{ m['content'] }}{% endfor %}", id="loop.index0"),
        pytest.param(LOOP + "{{ messages[loop.index0 - 1]['role'] }}{% endfor %}",
                     id="lookbehind"),
        pytest.param(LOOP + "{{ loop.previtem }}{% endfor %}", id="loop.previtem"),
        pytest.param("{% set ns = namespace(n=0) %}" + LOOP + "{% set ns.n = ns.n + 1 %}"
                     "{{ ns.n }}{% endfor %}", id="namespace write"),
        pytest.param("{% set pipe = joiner('|') %}" + LOOP + "{{ pipe() }}{% endfor %}",
                     id="joiner"),
        pytest.param(LOOP + "{{ strftime_now('%d') }}{% endfor %}", id="strftime_now"),
        pytest.param(LOOP + "{{ [1, 2] | random }}{% endfor %}", id="random filter"),
        pytest.param(LOOP + "{{ [[1, 2]] | map('random') | first }}{% endfor %}",
                     id="random through map"),
        pytest.param("{% set c = [cycler][0]('a', 'b') %}" + LOOP + "{{ c.next() }}{% endfor %}",
                     id="a cycler made outside the loop"),
        pytest.param(LOOP + "{% if add_generation_prompt %}x{% endif %}{% endfor %}",
                     id="add_generation_prompt in the loop"),
        pytest.param(LOOP + "{{ m['content'] }}{% endfor %}{% if add_generation_prompt %}A"
                     "{% else %}</s>{% endif %}", id="a closing with an else"),
        pytest.param(LOOP + "{{ m['content'] }}{% endfor %}{{ messages[0]['content'] }}",
                     id="a closing reading a message"),
        pytest.param(LOOP + "a{% endfor %}" + LOOP + "b{% endfor %}", id="two loops"),
        pytest.param("{{ messages | length }}" + LOOP + "a{% endfor %}", id="messages | length"),
        pytest.param("{% set messages = messages[1:] %}" + LOOP + "a{% endfor %}",
                     id="messages reassigned"),
        pytest.param(LOOP + "{% if m['role'] == 'x' %}{% break %}{% endif %}{% endfor %}",
                     id="break"),
        pytest.param("{% macro f(x) %}{{ x }}{% endmacro %}" + LOOP + "{{ f(m) }}{% endfor %}",
                     id="macro"),
        pytest.param("{% for m in messages if m['role'] != 'system' %}a{% endfor %}",
                     id="a filtered loop"),
        pytest.param("{% if x %}" + LOOP + "a{% endfor %}{% endif %}", id="loop inside an if"),
        pytest.param(LOOP + "{% for m2 in messages %}b{% endfor %}{% endfor %}",
                     id="nested loop over messages"),
        pytest.param("{% for m in messages %}", id="does not parse"),
    ],
)  # fmt: skip
def test_other_templates_are_not_proven(source: str) -> None:
    assert message_wise(source) is None


# ------------------------------------------------------------- renders: kept == whole

TEMPLATES = {
    "smollm2": template("smollm2"),
    "tools-chatml": TOOLS_CHATML,
    "qwen2.5": template("qwen2_5"),  # not proven: whole renders every time
}
TEXT = st.lists(st.sampled_from(["a", "中", " ", "\n", "|", "<", "x.", "é", ""]), max_size=5).map(
    "".join
)


@pytest.fixture(scope="module")
def tokenizers() -> dict[str, Any]:
    return {name: deepseek_with_template(source, spec=name) for name, source in TEMPLATES.items()}


def _forget() -> None:
    hf._KEPT.clear()
    hf._ENDS.clear()


def _render(fmt: Any, messages: list[Message], gen: bool) -> str:
    try:
        return str(fmt.render(messages, add_generation_prompt=gen))
    except PhaseawareError as exc:
        return f"{type(exc).__name__}: {exc}"


@st.composite
def conversations(draw: st.DrawFn) -> list[Message]:
    messages = [Message(role=draw(st.sampled_from(["system", "user"])), content=draw(TEXT) or "s")]
    for n in range(draw(st.integers(1, 7))):
        calls = tuple(
            ToolCall(name="search", arguments=f'{{"q": "{k}"}}', id=f"c{n}_{k}")
            for k in range(draw(st.integers(0, 2)))
        )
        messages.append(Message(role="assistant", content=draw(TEXT), tool_calls=calls))
        messages += [Message(role="tool", content=draw(TEXT), tool_call_id=c.id) for c in calls]
        extra = draw(st.sampled_from([None, "user", "system"]))
        if extra is not None:
            messages.append(Message(role=extra, content=draw(TEXT)))  # type: ignore[arg-type]
    return messages


@pytest.mark.parametrize("name", list(TEMPLATES))
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(messages=conversations(), data=st.data())
def test_kept_renders_give_the_whole_render(tokenizers, name, messages, data) -> None:
    fmt = get_chat_format("hf", tokenizers[name])
    _forget()
    for k in range(1, len(messages) + 1):
        start = messages[:k]
        gen = data.draw(st.booleans())
        kept = _render(fmt, start, gen)
        filled = [*start[:-1], start[-1].with_content(start[-1].content + "ctx")]
        kept_filled = _render(fmt, filled, not gen)
        assert kept == _whole(fmt, start, gen)
        assert kept_filled == _whole(fmt, filled, not gen)
        if k > 2:  # an edited earlier message (the first one too): nothing stale is reused
            i = data.draw(st.integers(0, k - 2))
            edited = [*start]
            edited[i] = edited[i].with_content(edited[i].content + "!")
            assert _render(fmt, edited, gen) == _whole(fmt, edited, gen)
            _render(fmt, start, False)  # keep the real conversation again


def _whole(fmt: Any, messages: list[Message], gen: bool) -> str:
    _forget()
    return _render(fmt, messages, gen)


def test_a_step_renders_the_new_messages_and_the_first_only(tokenizers, monkeypatch):
    fmt = get_chat_format("hf", tokenizers["tools-chatml"])
    _forget()
    calls = (ToolCall(name="search", arguments="{}", id="c0"),)
    messages = [Message(role="user", content="U" * 100)]
    for n in range(6):
        messages.append(Message(role="assistant", content=f"a{n}", tool_calls=calls))
        messages.append(Message(role="tool", content=f"r{n}", tool_call_id="c0"))
    fmt.render(messages[:-1], add_generation_prompt=False)  # the sent conversation
    lengths: list[int] = []
    real = hf_template.render_chat_template

    def counting(source: str, rendered: Any, **kwargs: Any) -> str:
        lengths.append(len(rendered))
        return real(source, rendered, **kwargs)

    monkeypatch.setattr(hf_template, "render_chat_template", counting)
    step = fmt.render(messages)
    assert lengths and max(lengths) <= 2  # [first, new], with and without markers
    monkeypatch.undo()
    assert step == _whole(fmt, messages, True)


def test_an_error_in_a_new_message_names_its_own_index(tokenizers):
    trimmed = deepseek_with_template(
        LOOP + "<|im_start|>{{ m['role'] }}\n{{ m['content'] | trim }}<|im_end|>\n{% endfor %}"
        + PROMPT, spec="trim"
    )  # fmt: skip
    fmt = get_chat_format("hf", trimmed)
    _forget()
    messages = [Message(role="user", content=f"m{i}") for i in range(5)]
    fmt.render(messages, add_generation_prompt=False)
    with pytest.raises(TemplateRewriteError, match="message 5") as info:
        fmt.render([*messages, Message(role="user", content=" padded ")])
    assert (info.value.index, info.value.change) == (5, "stripped whitespace")


class _ThirdPartyTokenizer:
    """A ChatTemplateTokenizer that renders by its own rule (not phaseaware's HFTokenizer)."""

    spec = "third-party"
    chat_template = CHATML

    def render_chat(self, messages: Any, *, add_generation_prompt: bool = True, **_: Any) -> str:
        turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return turns + ("<|im_start|>assistant\n" if add_generation_prompt else "")


def test_a_tokenizer_rendering_by_its_own_rule_renders_whole():
    fmt = hf.HFChatFormat(_ThirdPartyTokenizer())
    _forget()
    messages = [Message(role="user", content=f"m{i}") for i in range(4)]
    fmt.render(messages, add_generation_prompt=False)
    assert fmt.render(messages[:3]) == _ThirdPartyTokenizer().render_chat(
        [m.to_openai() for m in messages[:3]]
    )
    assert len(hf._KEPT) == 0  # its template text is not what it renders: nothing is kept


def test_an_unproven_template_keeps_nothing(tokenizers):
    fmt = get_chat_format("hf", tokenizers["qwen2.5"])
    _forget()
    messages = [Message(role="user", content=f"m{i}") for i in range(4)]
    fmt.render(messages, add_generation_prompt=False)
    fmt.render(messages)
    assert len(hf._KEPT) == 0 and len(hf._ENDS) == 0
