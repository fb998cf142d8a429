"""The LangChain adapters state the chat settings they planned with (no server needed)."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("langchain.agents")

from langchain.agents.middleware import ModelRequest  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.prompts import ChatPromptTemplate  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langchain_phaseaware import PhaseAwareMiddleware, PhaseAwarePrompt  # noqa: E402

from phaseaware.chat import ChatSettings, UnsupportedSettingError  # noqa: E402

COMMON: dict[str, Any] = {
    "tokenizer": "deepseek-v4",
    "profile": "deepseek-v4-flash-base",
    "budget_tokens": 2000,
}
MAX = ChatSettings(thinking=True, reasoning_effort="max", drop_thinking=False)


def _request(**settings: Any) -> ModelRequest:
    model = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused", model="m")  # type: ignore[arg-type]
    call = {"name": "search", "args": {"q": "x"}, "id": "c1"}
    messages = [
        HumanMessage("Which voltage?", id="h"),
        AIMessage("", tool_calls=[call], id="a"),
        ToolMessage("Module voltage below 3.1 V disables it.", tool_call_id="c1", id="t"),
    ]
    return ModelRequest(model=model, messages=messages, model_settings=settings)


@pytest.mark.parametrize("aligned", [True, False])
def test_middleware_puts_the_settings_on_every_request(aligned: bool) -> None:
    middleware = PhaseAwareMiddleware(chat_format="deepseek-v4", settings=MAX, **COMMON)
    request = _request(temperature=0)
    if not aligned:  # nothing to align: still stated
        request = request.override(messages=list(request.messages)[:1])
    sent, _, result = middleware.align(request)
    assert (result is not None) == aligned
    assert sent.model_settings == {
        "temperature": 0,
        "extra_body": {"chat_template_kwargs": MAX.chat_template_kwargs("deepseek-v4")},
    }
    assert request.model_settings == {"temperature": 0}  # the caller's request is unchanged


def test_middleware_with_chatml_states_nothing() -> None:
    middleware = PhaseAwareMiddleware(chat_format="chatml", **COMMON)
    sent, _, _ = middleware.align(_request())
    assert sent.model_settings == {}


def test_middleware_refuses_a_model_bound_with_other_settings() -> None:
    middleware = PhaseAwareMiddleware(chat_format="deepseek-v4", **COMMON)
    body = {"chat_template_kwargs": {"thinking": True, "enable_thinking": True}}
    with pytest.raises(UnsupportedSettingError, match="settings="):
        middleware.align(_request(extra_body=body))


def test_prompt_model_kwargs_is_the_binding() -> None:
    template = ChatPromptTemplate.from_messages([("system", "{context}"), ("human", "{question}")])
    prompt = PhaseAwarePrompt(template, chat_format="deepseek-v4", settings=MAX, **COMMON)
    assert prompt.model_kwargs() == {
        "extra_body": {"chat_template_kwargs": MAX.chat_template_kwargs("deepseek-v4")}
    }
    plain = PhaseAwarePrompt(template, chat_format="chatml", **COMMON)
    assert plain.model_kwargs() == {}


def test_the_models_own_reasoning_effort_is_planned_with() -> None:
    """A model bound to reasoning_effort="max" (13 tokens off on V4 if planned for "high"):
    the plan renders max and the request states it beside the model's own field."""
    from phaseaware.chat.deepseek_v4 import EFFORT_PREAMBLES

    high = ChatSettings(thinking=True, reasoning_effort="high")
    middleware = PhaseAwareMiddleware(chat_format="deepseek-v4", settings=high, **COMMON)
    model = ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="unused", model="m",  # type: ignore[arg-type]
                       reasoning_effort="max")  # fmt: skip
    for request in (_request().override(model=model), _request(reasoning_effort="max")):
        sent, _, result = middleware.align(request)
        stated = sent.model_settings["extra_body"]["chat_template_kwargs"]
        assert stated["reasoning_effort"] == "max" and stated["thinking"] is True
        assert result is not None and EFFORT_PREAMBLES["max"] in result.prompt
    sent, _, result = middleware.align(_request())  # none on the model: the adapter's own
    assert sent.model_settings["extra_body"]["chat_template_kwargs"]["reasoning_effort"] == "high"
    assert result is not None and EFFORT_PREAMBLES["high"] in result.prompt


def test_an_effort_the_server_refuses_is_refused_with_the_way_to_set_it() -> None:
    middleware = PhaseAwareMiddleware(chat_format="deepseek-v4.1", thinking=True, **COMMON)
    with pytest.raises(UnsupportedSettingError, match=r"PhaseAwareMiddleware\(settings="):
        middleware.align(_request(reasoning_effort="minimal"))  # vLLM's V4.1: HTTP 400
