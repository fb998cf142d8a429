"""Build a calibration backend from plain options (what ``phaseaware calibrate`` parses).

``BackendOptions.kind`` picks the backend: ``hf`` (a local transformers model),
``openai`` (an OpenAI-compatible server) or ``callable`` (``module:function``).
An ``hf`` run without ``model`` needs a ``default_model``
(:class:`~phaseaware.calibration.backends.hf.HFModelSource`); the reference
package provides the shipped model's, so this package never imports it.
``local_window`` declares the model's raw local window where the backend cannot
read it; it is a construction parameter of the backend's ``model_info``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from phaseaware.calibration.backends.base import Backend
from phaseaware.calibration.backends.callable import CallableBackend
from phaseaware.calibration.backends.hf import (
    HFModelSource,
    default_tokenizer_spec,
    load_hf_backend,
    model_display_name,
)
from phaseaware.calibration.backends.openai import OpenAIBackend
from phaseaware.errors import CalibrationError
from phaseaware.tokenizers.base import Tokenizer

__all__ = ["BackendKind", "BackendOptions", "make_backend", "run_names"]

BackendKind = Literal["hf", "openai", "callable"]


@dataclass(frozen=True)
class BackendOptions:
    """Everything a backend is built from. Times in seconds; ``threads``: torch CPU threads
    (``hf``); ``base_url`` .. ``prompt_token_check``: the ``openai`` backend's settings."""

    kind: BackendKind = "hf"
    model: str | None = None
    threads: int | None = 1
    local_window: int | None = None
    base_url: str | None = None
    endpoint: str = "chat"
    concurrency: int = 4
    timeout: float = 60.0
    max_retries: int = 5
    prompt_token_offset: int = 0
    prompt_token_check: bool = True
    api_key: str | None = field(default=None, repr=False)  # else the env (openai backend)


def _hf_model(options: BackendOptions, default_model: HFModelSource | None) -> str | HFModelSource:
    if options.model is not None:
        return options.model
    if default_model is None:
        raise CalibrationError("--backend hf needs --model (a folder, hf:<name> or .gguf file)")
    return default_model


def run_names(
    options: BackendOptions, *, tokenizer: str | None, default_model: HFModelSource | None = None
) -> tuple[str, str]:
    """(model display name, tokenizer spec) of a run; ``tokenizer``: the one asked for."""
    if options.kind == "hf":
        model = _hf_model(options, default_model)
        return model_display_name(model), tokenizer or default_tokenizer_spec(model)
    return options.model or options.kind, tokenizer or "reference"


def make_backend(
    options: BackendOptions,
    tokenizer: Tokenizer,
    *,
    default_model: HFModelSource | None = None,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> Backend:
    """The backend ``options`` describe (loads the model for ``hf``). ``chat_template_kwargs``:
    the chat settings an HTTP backend's chat requests state."""
    info: dict[str, Any] = {}
    if options.local_window is not None:
        info["local_window"] = options.local_window
    if options.kind == "hf":
        model = _hf_model(options, default_model)
        return load_hf_backend(model, tokenizer, threads=options.threads, model_info=info)
    if options.kind == "openai":
        if not options.base_url or not options.model:
            raise CalibrationError("--backend openai needs --base-url and --model")
        return OpenAIBackend(
            options.base_url,
            options.model,
            endpoint=options.endpoint,
            concurrency=options.concurrency,
            timeout=options.timeout,
            max_retries=options.max_retries,
            prompt_token_offset=options.prompt_token_offset,
            expected_prompt_tokens_check=options.prompt_token_check,
            model_info=info,
            api_key=options.api_key,
            chat_template_kwargs=chat_template_kwargs,
        )
    if options.kind == "callable":
        module_name, _, attr = (options.model or "").partition(":")
        if not module_name or not attr:
            raise CalibrationError("--backend callable needs --model module:function")
        fn = _import_callable(module_name, attr)
        return CallableBackend(fn, name=options.model or "callable", model_info=info)
    raise CalibrationError(f"unknown backend {options.kind!r}; use hf, openai or callable")


def _import_callable(module_name: str, attr: str) -> Any:
    """``module:function`` of ``--backend callable`` (``CalibrationError`` naming the fix)."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise CalibrationError(
            f"--model {module_name}:{attr}: cannot import module {module_name!r} ({exc}); "
            "check the name and that it is on PYTHONPATH"
        ) from None
    except Exception as exc:  # the module itself failed while importing
        raise CalibrationError(
            f"--model {module_name}:{attr}: importing {module_name!r} failed "
            f"({type(exc).__name__}: {exc})"
        ) from None
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise CalibrationError(
            f"--model {module_name}:{attr}: module {module_name!r} has no callable {attr!r}"
        )
    return fn
