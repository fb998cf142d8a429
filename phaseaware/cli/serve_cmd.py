"""``phaseaware serve-reference``: an OpenAI-compatible server for the reference model.

Serves ``/v1/models``, ``/v1/chat/completions`` and ``/v1/completions`` with
greedy decoding on CPU; chat messages are rendered with the model's chat
template and ``usage.prompt_tokens`` is the model tokenizer's exact count.
Binds 127.0.0.1 unless ``--host`` says otherwise. Stop with Ctrl-C.
"""

from __future__ import annotations

import argparse
import os

NAME = "serve-reference"
HELP = "Serve the shipped reference model over an OpenAI-compatible HTTP API."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--port", type=int, default=8000, help="TCP port (0: any free port)")
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1: local only)"
    )
    parser.add_argument(
        "--api-key",
        default=None,
        help="require 'Authorization: Bearer KEY' (default: env PHASEAWARE_SERVER_API_KEY, "
        "else no check)",
    )


def run(args: argparse.Namespace) -> int:
    import threading

    from phaseaware.errors import PhaseawareError
    from phaseaware.reference.engine import ReferenceEngine
    from phaseaware.reference.load import load_reference
    from phaseaware.serving.openai_server import start_server

    model, tokenizer = load_reference("cpu")
    engine = ReferenceEngine(model, tokenizer)
    api_key = args.api_key or os.environ.get("PHASEAWARE_SERVER_API_KEY") or None
    try:
        server = start_server(engine, host=args.host, port=args.port, api_key=api_key)
    except OSError as exc:
        raise PhaseawareError(
            f"cannot listen on {args.host}:{args.port} ({exc}); choose another --port or --host"
        ) from exc
    print(f"serving {engine.model_name} at {server.base_url} (Ctrl-C to stop)", flush=True)
    try:
        threading.Event().wait()
    finally:
        server.close()
    return 0
