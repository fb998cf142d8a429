"""SGLang 0.5.23's DeepSeek render path, run from SGLang's own files (no GPU, no install).

SGLang renders a ``dsv4`` / ``dsv41`` chat request in three steps:

1. the request model (``protocol.py``: ``ChatCompletionRequest.normalize_reasoning_inputs``:
   a top-level ``reasoning_effort`` sets ``chat_template_kwargs.thinking`` unless the kwargs
   name it) and ``serving_chat.py`` (``_convert_to_internal_request``: the kwargs'
   ``reasoning_effort`` replaces the request's; ``_thinking_requested``: thinking is
   ``chat_template_kwargs.thinking``, default ``SGLANG_DEFAULT_THINKING``, off; the tools are
   each ``Tool.model_dump()``);
2. ``serving_deepseek_recipe.py`` (``encode_messages``, ``_encode``: the wire messages,
   a trailing assistant turn, the effort and its server default);
3. ``deepseek_recipe_renderer.py`` (``pre_normalize``, ``DeepSeekRecipe.encode``) over
   ``deepseek-recipe``.

Steps 2 and 3 are SGLang's files themselves, read from the wheel
(``scripts/fetch_sglang_glue.sh``): the renderer file imports nothing from SGLang and is
loaded as it is; the serving file is executed as it is with its SGLang imports stubbed
(:data:`_STUBS`: output parsing, pydantic response types and the runtime context, none
of which the encode path calls; ``envs`` reads the two effort variables from the
environment as SGLang's ``EnvStr`` does). Step 1 lives in files that need SGLang's whole
runtime; :func:`sglang_prompt_ids` restates those few lines (the sources above).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
VERSION = "0.5.23"
RENDERER_FILE = "sglang/srt/parser/deepseek_recipe_renderer.py"
SERVING_FILE = "sglang/srt/entrypoints/openai/serving_deepseek_recipe.py"
#: protocol.py ReasoningEffortTier: the names the request's reasoning_effort takes
TIERS = ("none", "minimal", "low", "medium", "high", "xhigh", "ultra", "max")
#: SGLang's chat encoding spec, by phaseaware chat format
SPECS = {"deepseek-v4": "dsv4", "deepseek-v4.1": "dsv41"}


def glue_dir() -> Path:
    """Where ``scripts/fetch_sglang_glue.sh`` put the two files."""
    return Path(os.environ.get("PHASEAWARE_SGLANG_GLUE") or ROOT / ".cache" / f"sglang-{VERSION}")


def glue_missing() -> str | None:
    """Why the tier cannot run here (``None``: it can)."""
    if importlib.util.find_spec("deepseek_recipe") is None:
        return "deepseek-recipe is not installed (pip install -e '.[test]')"
    for name in (RENDERER_FILE, SERVING_FILE):
        if not (glue_dir() / name).is_file():
            return f"SGLang's {name} is missing: run scripts/fetch_sglang_glue.sh"
    return None


class _Env:
    """SGLang's ``EnvStr``: the variable's value, else the default."""

    def __init__(self, name: str, default: str | None) -> None:
        self.name, self.default = name, default

    def get(self) -> str | None:
        return os.environ.get(self.name, self.default)


def _unused(*_: Any, **__: Any) -> Any:
    raise AssertionError("the encode path never calls this SGLang name")


@dataclass
class _ImageData:
    url: str


# environ.py: SGLANG_DSV4_REASONING_EFFORT = EnvStr(""), SGLANG_DSV41_REASONING_EFFORT =
# EnvStr(None)
_ENVS = types.SimpleNamespace(
    SGLANG_DSV4_REASONING_EFFORT=_Env("SGLANG_DSV4_REASONING_EFFORT", ""),
    SGLANG_DSV41_REASONING_EFFORT=_Env("SGLANG_DSV41_REASONING_EFFORT", None),
)
_STUBS: dict[str, dict[str, Any]] = {
    "sglang.srt.entrypoints.openai.chat_encoding_adapters": {
        # chat_encoding_adapters.py: ADAPTER_OUTPUT_PARSERS
        "ADAPTER_OUTPUT_PARSERS": {
            "dsv4": ("deepseek-v4", "deepseekv4"),
            "dsv41": ("deepseek-v41", "deepseekv41"),
        },
        "select_new_output_ids": _unused,
        "token_output_sse_chunks": _unused,
    },
    "sglang.srt.entrypoints.openai.protocol": {"FunctionResponse": _unused, "ToolCall": _unused},
    "sglang.srt.environ": {"envs": _ENVS},
    "sglang.srt.function_call.core_types": {"ToolCallItem": _unused},
    "sglang.srt.parser.deepseek_recipe_output": {
        "DeepSeekRecipeOutputParser": _unused,
        "RecipeToolCall": _unused,
        "RecipeToolCallDelta": _unused,
        "parse_output_text": _unused,
        "whole_tool_calls": _unused,
    },
    "sglang.srt.runtime_context": {"get_serving": _unused},
    "sglang.srt.utils": {"ImageData": _ImageData},
}


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@contextmanager
def _stubbed(renderer: types.ModuleType) -> Iterator[None]:
    """SGLang's module names, stubbed, for one import; removed after it."""
    added: list[str] = []
    for dotted in [*_STUBS, "sglang.srt.parser.deepseek_recipe_renderer"]:
        parts = dotted.split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            if name not in sys.modules:
                module = types.ModuleType(name)
                module.__path__ = []  # a package, so submodules import
                sys.modules[name] = module
                added.append(name)
        if dotted in _STUBS:
            sys.modules[dotted].__dict__.update(_STUBS[dotted])
    sys.modules["sglang.srt.parser.deepseek_recipe_renderer"] = renderer
    try:
        yield
    finally:
        for name in added:
            sys.modules.pop(name, None)
        sys.modules.pop("sglang.srt.parser.deepseek_recipe_renderer", None)


@dataclass(frozen=True)
class Glue:
    renderer: types.ModuleType  # deepseek_recipe_renderer.py, as shipped
    serving: types.ModuleType  # serving_deepseek_recipe.py, as shipped


@cache
def load_glue() -> Glue:
    """SGLang's two files, loaded (see the module doc)."""
    folder = glue_dir()
    renderer = _load("_sglang_deepseek_recipe_renderer", folder / RENDERER_FILE)
    with _stubbed(renderer):
        serving = _load("_sglang_serving_deepseek_recipe", folder / SERVING_FILE)
    return Glue(renderer=renderer, serving=serving)


class _HFTokenizer:
    """What SGLang's adapter reads of a transformers fast tokenizer."""

    def __init__(self, path: Path) -> None:
        from tokenizers import Tokenizer

        self.backend_tokenizer = Tokenizer.from_file(str(path))


@cache
def adapter(chat_format: str, tokenizer_json: str) -> Any:
    """SGLang's ``DeepSeekRecipeChatEncodingAdapter`` for ``chat_format`` over the
    checkpoint tokenizer (built per process: it reads the effort variables at boot)."""
    glue = load_glue()
    return glue.serving.DeepSeekRecipeChatEncodingAdapter(
        chat_encoding_spec=SPECS[chat_format],
        tokenizer=_HFTokenizer(Path(tokenizer_json)),
        reasoning_parser=None,
        tool_call_parser=None,
        chat_hooks=None,
        default_chat_template_kwargs=None,
    )


@dataclass
class _Request:
    """The parts of SGLang's ``ChatCompletionRequest`` the encode path reads."""

    wire: dict[str, Any]
    reasoning_effort: Any
    continue_final_message: bool = False
    task: str | None = None

    def model_dump(self, **_: Any) -> dict[str, Any]:
        return self.wire


def _tool_dump(tool: Mapping[str, Any]) -> dict[str, Any]:
    """``Tool.model_dump()`` (protocol.py ``Tool``, ``Function``: declared fields, unset as
    None, unknown keys ignored)."""
    function = tool["function"]
    return {
        "type": tool.get("type", "function"),
        "function": {
            "description": function.get("description"),
            "name": function["name"],
            "parameters": function.get("parameters"),
            "strict": function.get("strict"),
            "defer_loading": function.get("defer_loading"),
        },
        "defer_loading": tool.get("defer_loading"),
    }


def sglang_prompt_ids(chat_format: str, tokenizer_json: str, body: Mapping[str, Any]) -> list[int]:
    """The prompt ids SGLang 0.5.23 renders for the chat request ``body`` (the JSON a client
    sends); ``ValueError`` where SGLang answers HTTP 400."""
    kwargs = dict(body.get("chat_template_kwargs") or {})
    effort = body.get("reasoning_effort")
    if isinstance(effort, bool):  # validate_reasoning_effort_type
        raise ValueError("reasoning_effort must not be a boolean")
    if effort is not None and not (  # ReasoningEffortType: a tier or a float 0-0.99
        effort in TIERS or (isinstance(effort, int | float) and 0 <= effort <= 0.99)
    ):
        raise ValueError(f"reasoning_effort {effort!r} is not a tier or a float in [0, 0.99]")
    if effort is not None:  # normalize_reasoning_inputs
        kwargs.setdefault("thinking", effort != "none")
        kwargs.setdefault("enable_thinking", effort != "none")
    kwargs_effort = kwargs.pop("reasoning_effort", None)  # _convert_to_internal_request
    if kwargs_effort is not None:
        effort = kwargs_effort
    thinking = kwargs.get("thinking", os.environ.get("SGLANG_DEFAULT_THINKING") in ("1", "true"))
    tools = None
    if body.get("tools") and body.get("tool_choice") != "none":  # _process_messages
        tools = [_tool_dump(t) for t in body["tools"]]
    wire = {k: body[k] for k in ("messages", "tool_choice", "response_format") if k in body}
    request = _Request(wire={**wire, "messages": [dict(m) for m in body["messages"]]},
                       reasoning_effort=effort)  # fmt: skip
    ids: list[int] = adapter(chat_format, tokenizer_json).encode_messages(
        messages=[dict(m) for m in body["messages"]],
        request=request,
        tools=tools,
        thinking=bool(thinking),
        image_data=[],
    )
    return ids
