"""probe-endpoint at a stand-in SGLang: its info routes, and counts from SGLang's own render
path (deepseek-recipe driven by SGLang's glue files); a plan made with the record is exact."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest

from phaseaware.assembly import assemble
from phaseaware.chat.settings import ChatSettings
from phaseaware.endpoints import probe_endpoint
from phaseaware.endpoints.request_settings import record_settings
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.tokenizers.registry import deepseek_v4_dir
from tests.support.endpoint_server import EndpointApp, start_endpoint
from tests.support.sglang_fuzz import v41_tokenizer_dir
from tests.support.sglang_glue import VERSION, sglang_prompt_ids

# SGLang 0.5.23 serves both spellings of each (http_server.py: server_info, model_info)
SERVER_INFO = {"version": VERSION, "model_path": "deepseek-ai/DeepSeek-V4-Flash",
               "tp_size": 8, "frontend": "python"}  # fmt: skip
MODEL_INFO = {"model_path": "deepseek-ai/DeepSeek-V4-Flash", "is_generation": True,
              "architectures": ["DeepseekV4ForCausalLM"]}  # fmt: skip
ROUTES = {"/server_info": SERVER_INFO, "/get_server_info": SERVER_INFO,
          "/model_info": MODEL_INFO, "/get_model_info": MODEL_INFO}  # fmt: skip

CONVERSATION = [  # the rules where SGLang and the encoder file disagree, in one chat
    {"role": "system", "content": "You answer from the documents."},
    {"role": "user", "content": "Earlier question."},
    {"role": "assistant", "content": "First part.", "reasoning_content": "thought"},
    {"role": "assistant", "content": "Second part."},
    {"role": "developer", "content": "Cite the document."},
    {"role": "system", "content": "A late system note."},
    {"role": "user", "content": "{context}\n\n{question}"},
]


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PHASEAWARE_HOME", str(tmp_path))
    return tmp_path


def _sglang(name: str, folder: Path, tok: Tokenizer) -> Iterator[tuple[str, EndpointApp]]:
    tokenizer_json = str(folder / "tokenizer.json")
    server, app = start_endpoint(
        tokenizer=tok,
        chat_format=name,
        model="sim-model",
        prompt_ids=lambda body: sglang_prompt_ids(name, tokenizer_json, body),
        get_routes=ROUTES,
    )
    with server:
        yield server.base_url, app


@pytest.mark.parametrize("name", ["deepseek-v4", "deepseek-v4.1"])
@pytest.mark.parametrize("thinking", [False, True])
def test_probe_records_sglang_and_its_plans_are_exact(
    name: str, thinking: bool, home: Path, tmp_path: Path
) -> None:
    folder = deepseek_v4_dir() if name == "deepseek-v4" else v41_tokenizer_dir(tmp_path / "v41")
    tok = load_tokenizer(f"hf:{folder}")
    for base_url, app in _sglang(name, folder, tok):
        record = probe_endpoint(
            base_url=base_url, model="sim-model", tokenizer=tok, chat_format=name,
            thinking=thinking, save=False,
        )  # fmt: skip
        assert record.server == f"sglang {VERSION}" and record.renderer == "sglang"
        assert (record.mode, record.offset, record.stability) == ("count", 0, "constant")
        assert record.settings_check == "verified"
        settings = record_settings(record)
        assert settings.renderer == "sglang"
        for effort in (None, "max", "medium"):
            stated = dataclasses.replace(settings, reasoning_effort=effort)
            result = assemble(
                ["Document one: the answer is 42.", "Document two: unrelated."],
                question="What is the answer?",
                tokenizer=tok,
                chat_format=name,
                settings=stated,
                messages=CONVERSATION,
                budget_tokens=4000,
            )
            client = openai.OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0)
            extra: dict[str, Any] = {"chat_template_kwargs": stated.chat_template_kwargs(name)}
            response = client.chat.completions.create(
                model="sim-model", messages=list(result.messages or ()),  # type: ignore[arg-type]
                max_tokens=1, extra_body=extra,
            )  # fmt: skip
            assert response.usage is not None
            assert response.usage.prompt_tokens == result.token_count + record.offset
            assert list(app.log[-1].ids) == tok.encode(result.prompt)  # id for id


def test_a_vllm_plan_is_not_sglangs(home: Path) -> None:
    """The control: the same conversation planned for vLLM's renderer is not what SGLang
    renders (its late system message, developer turn and assistant pair)."""
    tok = load_tokenizer("deepseek-v4")
    body = {"messages": [{"role": m["role"], "content": m["content"].format(
        context="ctx", question="q")} for m in CONVERSATION]}  # fmt: skip
    vllm = ChatSettings()
    sglang = ChatSettings(renderer="sglang")
    from phaseaware.chat.formats import get_chat_format
    from phaseaware.chat.messages import parse_messages

    messages = parse_messages(body["messages"])
    theirs = sglang_prompt_ids(
        "deepseek-v4", str(deepseek_v4_dir() / "tokenizer.json"),
        {**body, "chat_template_kwargs": sglang.chat_template_kwargs("deepseek-v4")},
    )  # fmt: skip
    for settings, same in ((sglang, True), (vllm, False)):
        text = get_chat_format("deepseek-v4", tok, settings=settings).render(messages)
        assert (tok.encode(text) == theirs) is same
