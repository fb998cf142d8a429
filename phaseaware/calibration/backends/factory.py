"""Build a calibration backend from plain options (what ``phaseaware calibrate`` parses).

``BackendOptions.kind`` names an entry of the backend registry: ``hf`` (a local
transformers model), ``openai`` (an OpenAI-compatible server) or ``callable``
(``module:function``). Each entry owns its options (``BackendEntry.options``: the
``BackendOptions`` fields it reads) and how it is built and named; the built-ins are
registered with :func:`register_backend`, the same call a third-party backend makes.
An ``hf`` run without ``model`` needs a ``default_model``
(:class:`~phaseaware.calibration.backends.hf.HFModelSource`); the reference
package provides the shipped model's, so this package never imports it.
``local_window`` declares the model's raw local window where the backend cannot
read it; it is a construction parameter of the backend's ``model_info``.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

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

__all__ = [
    "BackendEntry",
    "BackendKind",
    "BackendOptions",
    "backend_names",
    "make_backend",
    "register_backend",
    "run_names",
]

BackendKind = str  # a registered backend name (``backend_names()``)


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
    chat_template_kwargs: Mapping[str, Any] | None = None  # the chat settings requests state


def _hf_model(options: BackendOptions, default_model: HFModelSource | None) -> str | HFModelSource:
    if options.model is not None:
        return options.model
    if default_model is None:
        raise CalibrationError("--backend hf needs --model (a folder, hf:<name> or .gguf file)")
    return default_model


@dataclass(frozen=True)
class BackendEntry:
    """One calibration backend: ``build(options, tokenizer, model_info, default_model)``
    makes it; ``names(options, default_model)`` gives (model display name, default
    tokenizer spec); ``options``: the ``BackendOptions`` fields it reads."""

    name: str
    build: Callable[[BackendOptions, Tokenizer, dict[str, Any], HFModelSource | None], Backend]
    names: Callable[[BackendOptions, HFModelSource | None], tuple[str, str]]
    options: frozenset[str]


_BACKENDS: dict[str, BackendEntry] = {}


def register_backend(entry: BackendEntry) -> None:
    """Add (or replace) a backend under ``entry.name`` (``--backend NAME``)."""
    _BACKENDS[entry.name] = entry


def backend_names() -> tuple[str, ...]:
    """Registered backend names, in registration order."""
    return tuple(_BACKENDS)


def _entry(options: BackendOptions) -> BackendEntry:
    entry = _BACKENDS.get(options.kind)
    if entry is None:
        raise CalibrationError(
            f"unknown backend {options.kind!r}; use one of {', '.join(_BACKENDS)} (--backend)"
        )
    return entry


def run_names(
    options: BackendOptions, *, tokenizer: str | None, default_model: HFModelSource | None = None
) -> tuple[str, str]:
    """(model display name, tokenizer spec) of a run; ``tokenizer``: the one asked for."""
    model, default_tokenizer = _entry(options).names(options, default_model)
    return model, tokenizer or default_tokenizer


def make_backend(
    options: BackendOptions,
    tokenizer: Tokenizer,
    *,
    default_model: HFModelSource | None = None,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> Backend:
    """The backend ``options`` describe (loads the model for ``hf``). ``chat_template_kwargs``:
    the chat settings an HTTP backend's chat requests state (else ``options``')."""
    if chat_template_kwargs is not None:
        options = dataclasses.replace(options, chat_template_kwargs=chat_template_kwargs)
    info: dict[str, Any] = {}
    if options.local_window is not None:
        info["local_window"] = options.local_window
    return _entry(options).build(options, tokenizer, info, default_model)


def _build_hf(
    options: BackendOptions, tokenizer: Tokenizer, info: dict[str, Any],
    default_model: HFModelSource | None,
) -> Backend:  # fmt: skip
    model = _hf_model(options, default_model)
    return load_hf_backend(model, tokenizer, threads=options.threads, model_info=info)


def _names_hf(options: BackendOptions, default_model: HFModelSource | None) -> tuple[str, str]:
    model = _hf_model(options, default_model)
    return model_display_name(model), default_tokenizer_spec(model)


def _build_openai(
    options: BackendOptions, tokenizer: Tokenizer, info: dict[str, Any],
    default_model: HFModelSource | None,
) -> Backend:  # fmt: skip
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
        chat_template_kwargs=options.chat_template_kwargs,
    )


def _build_callable(
    options: BackendOptions, tokenizer: Tokenizer, info: dict[str, Any],
    default_model: HFModelSource | None,
) -> Backend:  # fmt: skip
    module_name, _, attr = (options.model or "").partition(":")
    if not module_name or not attr:
        raise CalibrationError("--backend callable needs --model module:function")
    fn = _import_callable(module_name, attr)
    return CallableBackend(fn, name=options.model or "callable", model_info=info)


def _names_remote(options: BackendOptions, default_model: HFModelSource | None) -> tuple[str, str]:
    return options.model or options.kind, "reference"


register_backend(
    BackendEntry("hf", _build_hf, _names_hf, frozenset({"model", "threads", "local_window"}))
)
register_backend(
    BackendEntry(
        "openai",
        _build_openai,
        _names_remote,
        frozenset(
            {
                "model",
                "local_window",
                "base_url",
                "endpoint",
                "concurrency",
                "timeout",
                "max_retries",
                "prompt_token_offset",
                "prompt_token_check",
                "api_key",
            }
        ),  # fmt: skip
    )
)
register_backend(
    BackendEntry("callable", _build_callable, _names_remote, frozenset({"model", "local_window"}))
)


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
