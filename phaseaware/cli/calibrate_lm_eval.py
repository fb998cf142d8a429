"""``phaseaware calibrate --emit-lm-eval-task DIR``: the probes as an lm-eval task, no model run.

The tokenizer and chat format are chosen as a ``calibrate`` run with the same
flags chooses them (default: the reference model's), so the task's prompts are
exactly that run's key-sweep probes (:mod:`phaseaware.calibration.lm_eval_task`). Two tasks
are written: ``<task>`` for lm-eval's completions route and ``<task>_chat`` for its chat-API
route (``local-chat-completions --apply_chat_template``).
"""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["emit_task"]


def emit_task(args: argparse.Namespace, settings: Any) -> int:
    from phaseaware.calibration.backends.factory import BackendOptions, run_names
    from phaseaware.calibration.lm_eval_task import emit_lm_eval_task
    from phaseaware.chat.layout import conversation_layout
    from phaseaware.errors import CalibrationError
    from phaseaware.tokenizers import load_tokenizer

    if args.backend == "openai" and not args.tokenizer:
        raise CalibrationError("--backend openai needs --tokenizer (the served model's tokenizer)")
    default_model = None
    if args.backend == "hf" and args.model is None:
        from phaseaware.reference.load import reference_model_source

        default_model = reference_model_source()
    options = BackendOptions(kind=args.backend, model=args.model)
    _, spec = run_names(options, tokenizer=args.tokenizer, default_model=default_model)
    tokenizer = load_tokenizer(spec)
    chat_format = args.chat_format or "hf"
    layout = conversation_layout(tokenizer=tokenizer, chat_format=chat_format)
    task = emit_lm_eval_task(
        args.emit_lm_eval_task, tokenizer=tokenizer, layout=layout, settings=settings
    )
    print(f"task {task.task}: {task.n_docs} probes (key sweep, period {settings.n_offsets})")
    print(f"yaml: {task.yaml_path}\ndata: {task.data_path}")
    folder = task.yaml_path.parent
    print(
        f"run: lm_eval --model local-completions --include_path {folder} --tasks {task.task} "
        "--log_samples --output_path OUT ...; then: phaseaware score --format lm-eval "
        f"--tokenizer {spec} OUT"
    )
    if task.chat is not None:  # the chat-API route: the server applies its chat template
        chat = task.chat
        server_format = (  # score renders the logged messages as the server did
            "--chat-format SERVER_FORMAT (or --server URL)"
            if chat_format == "none"
            else f"--chat-format {chat_format}"
        )
        print(f"chat task {chat.task}: the same probes as user messages (no BOS, no template)")
        print(f"yaml: {chat.yaml_path}\ndata: {chat.data_path}")
        print(
            f"run: lm_eval --model local-chat-completions --apply_chat_template --include_path "
            f"{folder} --tasks {chat.task} --log_samples --output_path OUT ...; then: "
            f"phaseaware score --format lm-eval --tokenizer {spec} {server_format} OUT"
        )
    return 0
