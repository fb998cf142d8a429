"""The files a command reads, so that none of its outputs can replace one of them.

``calibrate --out tokenizer.json`` would destroy the tokenizer it measures, ``--log`` the
API key file, ``--plot`` the callable's own module. :func:`calibrate_inputs` lists every
file a calibration run reads (key file, batch input, tokenizer and model folders, the
callable's module); the command hands them, with its outputs, to
:func:`phaseaware.atomic.refuse_outputs_over_inputs` before any probe runs.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import sys
from pathlib import Path

__all__ = ["FOLDER_FILES_MAX", "calibrate_inputs", "compare_inputs", "files_of", "score_inputs"]

#: Files listed per input folder (a model folder holds a handful; a huge tree is not a model).
FOLDER_FILES_MAX = 10_000


def files_of(path: str | os.PathLike[str], *, what: str) -> dict[str, Path]:
    """``path`` itself, or, for a folder, every file in it (two levels deep at most,
    :data:`FOLDER_FILES_MAX` at most), each described for the message as ``what``."""
    given = Path(path)
    if not given.is_dir():
        return {f"{what} {given}": given} if given.exists() else {}
    found: dict[str, Path] = {}
    with contextlib.suppress(OSError):
        for pattern in ("*", "*/*"):
            for item in sorted(given.glob(pattern)):
                if len(found) >= FOLDER_FILES_MAX:
                    return found
                if item.is_file():
                    found[f"{what} {item}"] = item
    return found


def _tokenizer_files(spec: str | None) -> dict[str, Path]:
    from phaseaware.tokenizers.registry import REFERENCE_MODEL_DIR

    if spec is None:
        return {}
    if spec == "reference":
        return files_of(REFERENCE_MODEL_DIR, what="the tokenizer file")
    kind, _, rest = spec.partition(":")
    if kind == "hf" and rest and Path(rest).exists():
        return files_of(rest, what="the tokenizer file")
    return {}  # tiktoken encodings, packaged or hub-cached tokenizers: not the user's files


def _module_file(module_name: str) -> Path | None:
    """The source file of ``module_name`` without running it (its parent packages may be
    imported, as the backend would import them anyway); ``None`` if not found."""
    loaded = sys.modules.get(module_name)
    if loaded is not None:
        name = getattr(loaded, "__file__", None)
        return Path(name) if isinstance(name, str) else None
    try:
        spec = importlib.util.find_spec(module_name)
    except Exception:  # a broken parent package: the backend's own import reports it
        return None
    origin = spec.origin if spec is not None else None
    return Path(origin) if origin and Path(origin).is_file() else None


def calibrate_inputs(args: argparse.Namespace, *, tokenizer_spec: str | None) -> dict[str, Path]:
    """Every file ``phaseaware calibrate`` reads: description -> path."""
    from phaseaware.tokenizers.registry import REFERENCE_MODEL_DIR

    inputs: dict[str, Path] = {}
    if args.api_key_file:
        inputs[f"--api-key-file {args.api_key_file}"] = Path(args.api_key_file)
    if getattr(args, "ingest", None):
        inputs[f"--ingest {args.ingest}"] = Path(args.ingest)
    inputs.update(_tokenizer_files(tokenizer_spec))
    if args.backend == "hf":
        model = args.model
        if model is None:
            inputs.update(files_of(REFERENCE_MODEL_DIR, what="the reference model's file"))
        else:
            local = model[3:] if model.startswith("hf:") else model
            if Path(local).exists():
                inputs.update(files_of(local, what="the model file"))
    elif args.backend == "callable" and args.model and ":" in args.model:
        module = _module_file(args.model.partition(":")[0])
        if module is not None:
            inputs[f"the callable's module {module}"] = module
    return inputs


def compare_inputs(args: argparse.Namespace) -> dict[str, Path]:
    """Every file ``phaseaware compare`` reads: the questions, the profile, the grader's
    module, and what ``calibrate`` with the same backend flags reads."""
    from phaseaware.errors import PhaseawareError
    from phaseaware.profiles.registry import profile_path

    inputs = calibrate_inputs(args, tokenizer_spec=args.tokenizer)
    if args.questions:
        inputs[f"the questions file {args.questions}"] = Path(args.questions)
    with contextlib.suppress(PhaseawareError, OSError):  # a bad --profile is reported later
        found = profile_path(args.profile)
        inputs[f"the profile {found}"] = found
    if ":" in args.grader:
        module = _module_file(args.grader.partition(":")[0])
        if module is not None:
            inputs[f"the grader's module {module}"] = module
    return inputs


def score_inputs(args: argparse.Namespace) -> dict[str, Path]:
    """Every file ``phaseaware score`` reads: the eval log (or its folder's files), the NIAH
    contexts folder and the tokenizer's files."""
    inputs = files_of(args.log, what="the eval log")
    if args.contexts:
        inputs.update(files_of(args.contexts, what="the contexts file"))
    inputs.update(_tokenizer_files(args.tokenizer))
    return inputs
