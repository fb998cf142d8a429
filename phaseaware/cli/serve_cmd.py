"""``phaseaware serve-reference``: an OpenAI-compatible server for the reference model.

Serves ``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions`` with
greedy decoding on CPU, on uvicorn (:mod:`phaseaware.reference.server`); chat messages
are rendered with the model's chat template and ``usage.prompt_tokens`` is the model
tokenizer's exact count. Binds 127.0.0.1 unless ``--host`` says otherwise. The port is
checked and bound before the model loads. Stop with Ctrl-C.
"""

from __future__ import annotations

import argparse

from phaseaware.cli.argtypes import integer
from phaseaware.errors import PhaseawareError

NAME = "serve-reference"
HELP = "Serve the shipped reference model over an OpenAI-compatible HTTP API."
API_KEY_ENV = "PHASEAWARE_SERVER_API_KEY"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: local only)"
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"require 'Authorization: Bearer KEY' (visible to other users in `ps`: prefer env "
        f"{API_KEY_ENV} or --api-key-file; default: no check)",
    )
    parser.add_argument(
        "--api-key-file", default=None, help="read the required API key from this file"
    )
    parser.add_argument(
        "--threads",
        type=integer(1, 4096),
        default=1,
        help="torch CPU threads for the model (default 1: the small model gains nothing from "
        "more, and requests need the other cores; more threads on a busy machine stall)",
    )


def _api_key(args: argparse.Namespace) -> str | None:
    from phaseaware.cli.api_keys import api_key_from_args

    return api_key_from_args(args, error=PhaseawareError, env_name=API_KEY_ENV, read_env=True)


def run(args: argparse.Namespace) -> int:
    import logging

    from phaseaware.extras import require_extra

    require_extra(
        modules=("torch", "safetensors", "transformers", "uvicorn"),
        extra="reference",
        what="serve-reference (the reference model on uvicorn)",
    )
    from phaseaware.reference.server import ServerLimits, bind_socket

    if not 0 <= args.port <= 65535:
        raise PhaseawareError(f"--port must be in 0..65535 (0: any free port), got {args.port}")
    api_key = _api_key(args)
    limits = ServerLimits()
    try:
        sock = bind_socket(args.host, args.port, backlog=limits.backlog)
    except OSError as exc:
        raise PhaseawareError(
            f"cannot listen on {args.host}:{args.port} ({exc}); choose another --port or --host"
        ) from exc
    try:
        import torch

        from phaseaware.reference.engine import ReferenceEngine
        from phaseaware.reference.load import load_reference
        from phaseaware.reference.server import OpenAIApp, serve

        torch.set_num_threads(args.threads)
        model, tokenizer = load_reference("cpu")
        app = OpenAIApp(ReferenceEngine(model, tokenizer), api_key=api_key, limits=limits)
        host, port = sock.getsockname()[:2]
        shown = f"[{host}]" if ":" in str(host) else host
        print(
            f"serving {app.engine.model_name} at http://{shown}:{port}/v1 (Ctrl-C to stop)",
            flush=True,
        )
        logging.basicConfig(level=logging.WARNING, format="phaseaware: %(levelname)s %(message)s")
        serve(app, sock, limits)
    finally:
        sock.close()
    return 0
