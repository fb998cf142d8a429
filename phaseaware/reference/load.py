"""Load the shipped reference model (package data, offline) as transformers objects.

Nothing here runs at import: :func:`register` adds the model classes to
transformers' Auto registries when first needed, so that
``AutoModelForCausalLM.from_pretrained(model_dir())`` works afterwards.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from phaseaware.calibration.backends.hf import HFModelSource
from phaseaware.errors import PhaseawareError
from phaseaware.extras import install_line, missing_message
from phaseaware.reference.paths import MODEL_NAME, model_dir

__all__ = [
    "register",
    "load_reference",
    "load_reference_model",
    "reference_model_source",
    "reference_profile_defaults",
]


def register() -> None:
    """Register ``phaseaware-ref`` with AutoConfig/AutoModelForCausalLM (idempotent)."""
    try:
        from transformers import AutoConfig, AutoModelForCausalLM
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise PhaseawareError(
            missing_message(
                "transformers and torch",
                what="the reference model",
                command=install_line("reference"),
            )
        ) from exc

    from phaseaware.reference.configuration import PhaseRefConfig
    from phaseaware.reference.modeling import PhaseRefForCausalLM

    AutoConfig.register(PhaseRefConfig.model_type, PhaseRefConfig, exist_ok=True)
    AutoModelForCausalLM.register(PhaseRefConfig, PhaseRefForCausalLM, exist_ok=True)


def load_reference(device: str = "cpu", *, directory: str | Path | None = None) -> tuple[Any, Any]:
    """``(model, tokenizer)`` of the reference model, in eval mode on ``device``.

    ``directory`` defaults to the package data folder (:func:`model_dir`);
    nothing is downloaded.
    """
    folder = Path(directory) if directory is not None else model_dir()
    missing = [
        n
        for n in ("config.json", "model.safetensors", "tokenizer.json")
        if not (folder / n).is_file()
    ]
    if missing:
        raise PhaseawareError(
            f"reference model files {missing} are missing in {folder}; reinstall phaseaware or "
            "train one with `python -m phaseaware.reference.train --out DIR` and pass directory=DIR"
        )
    register()
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

    with _quiet_transformers():  # no weight-loading bar, no notices for the shipped model
        model = AutoModelForCausalLM.from_pretrained(str(folder), local_files_only=True)
    # PreTrainedModel.to is decorated with functools.wraps(nn.Module.to); mypy then types it
    # as an unbound _Wrapped whose first argument is the model, not the device.
    model = model.to(device).eval()  # type: ignore[arg-type]
    tokenizer = PreTrainedTokenizerFast.from_pretrained(str(folder), local_files_only=True)
    return model, tokenizer


@contextlib.contextmanager
def _quiet_transformers() -> Iterator[None]:
    """transformers' logging at ERROR and its progress bars off, restored afterwards."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()  # type: ignore[no-untyped-call]
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


def load_reference_model() -> Any:
    """The reference model alone (eval mode, CPU), for calibration backends."""
    model, _tokenizer = load_reference()
    return model


def reference_model_source() -> HFModelSource:
    """The reference model as an :class:`HFModelSource`: what ``phaseaware calibrate`` and
    ``phaseaware demo`` calibrate when no ``--model`` is given."""
    return HFModelSource(
        name=MODEL_NAME,
        tokenizer_spec="reference",
        description="the reference model",
        load=load_reference_model,
    )


def reference_profile_defaults() -> dict[str, int]:
    """The compression geometry the reference model was built with (tokens)."""
    return {"period": 8, "compress_stride": 8, "compress_window": 8, "local_window": 16}
