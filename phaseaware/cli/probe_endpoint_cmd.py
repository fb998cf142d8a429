"""``phaseaware probe-endpoint``: discover an endpoint's offset and write its record.

Parses arguments, calls :func:`phaseaware.endpoints.probe_endpoint`, prints the
record (``--json``: the record document, offset under ``offset``). The API key
comes from ``--api-key-file`` or ``PHASEAWARE_API_KEY`` / ``OPENAI_API_KEY``
and is never written or printed.
"""

from __future__ import annotations

import argparse
import json

from phaseaware.cli.argtypes import seconds

NAME = "probe-endpoint"
HELP = "Find how an endpoint's token positions relate to phaseaware's (offset, stability)."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8000/v1")
    parser.add_argument("--model", required=True, help="model name the server serves")
    parser.add_argument("--tokenizer", required=True, help="tokenizer spec (e.g. deepseek-v4)")
    parser.add_argument(
        "--chat-format",
        required=True,
        help="chat format: none, chatml, hf, deepseek-v4 or deepseek-v4.1",
    )
    parser.add_argument(
        "--mode", choices=("auto", "exact", "count"), default="auto",
        help="exact: compare tokens via /tokenize; count: infer from usage.prompt_tokens; "
        "auto: exact where possible (default)",
    )  # fmt: skip
    parser.add_argument("--rounds", type=int, default=3, help="count mode repeats (default 3)")
    parser.add_argument("--thinking", action="store_true", help="the thinking chat variant")
    parser.add_argument(
        "--api-key-file", metavar="FILE",
        help="read the API key from FILE (else PHASEAWARE_API_KEY / OPENAI_API_KEY)",
    )  # fmt: skip
    parser.add_argument(
        "--timeout", type=seconds(), default=30.0,
        help="seconds per HTTP attempt, connect to last byte (default 30)",
    )  # fmt: skip
    parser.add_argument("--no-save", action="store_true", help="do not write the record")
    parser.add_argument("--json", action="store_true", help="print the record as JSON")


def run(args: argparse.Namespace) -> int:
    from phaseaware.cli.api_keys import read_key_file
    from phaseaware.cli.flags import check_server
    from phaseaware.endpoints import probe_endpoint
    from phaseaware.endpoints.record import record_path
    from phaseaware.errors import EndpointError, InputError

    key = (
        read_key_file(args.api_key_file, error=InputError)
        if args.api_key_file is not None
        else None
    )
    if key is not None and not args.no_save:  # the record must never replace the key file
        from phaseaware.atomic import refuse_outputs_over_inputs

        output = {"the endpoint record": record_path(args.base_url.strip(), args.model)}
        refuse_outputs_over_inputs(
            output, {f"--api-key-file {args.api_key_file}": args.api_key_file}
        )
    if key is None:  # an unusable key in the environment is named before the network
        from phaseaware.credentials import api_key_from_env
        from phaseaware.endpoints.probe import API_KEY_ENV_VARS

        api_key_from_env(API_KEY_ENV_VARS, error=EndpointError)
    check_server(args.base_url, error=EndpointError)  # 3 s: nothing listening, say so
    record = probe_endpoint(
        base_url=args.base_url, model=args.model, tokenizer=args.tokenizer,
        chat_format=args.chat_format, api_key=key, mode=args.mode, rounds=args.rounds,
        thinking=args.thinking, save=not args.no_save, timeout=args.timeout,
    )  # fmt: skip
    if args.json:
        print(json.dumps(record.to_dict(), indent=2))
        return 0
    offsets = ", ".join(str(d) for d in record.offsets)
    print(f"endpoint {record.base_url}  model {record.model}  ({record.mode} mode, "
          f"{record.probes} requests)")  # fmt: skip
    if record.stability == "constant":
        print(f"offset: {record.offset} (constant): the model sees prompt token t at t + "
              f"{record.offset}")  # fmt: skip
    else:
        print(f"offset: varying over {{{offsets}}}: use offset-robust placement "
              f"(options.offsets = [{offsets}], or this record as the request's endpoint)")  # fmt: skip
    sent = "thinking on" if record.thinking else "thinking off"
    print(f"requests state: {sent} (chat_template_kwargs; the plan uses the same settings)")
    default = record.server_default
    if default is not None and default.get("matched"):
        print(f"server default (a request naming no settings): thinking "
              f"{'on' if default.get('thinking') else 'off'}")  # fmt: skip
    elif default is not None:
        print(f"server default: {default.get('extra_tokens')} more tokens than any setting "
              f"phaseaware renders; {default.get('note')}")  # fmt: skip
    if record.ids_route:
        print(
            f"server ids from: {record.ids_route}"
            + (f" ({record.ids_note})" if record.ids_note else "")
        )
    if record.effort_budgets:
        print(f"V4.1 effort table: {record.effort_budgets} (every plan with this record uses it)")
    if record.renderer == "sglang":
        print("renderer: sglang (DeepSeek's reference encoder, as SGLang renders; every plan "
              "with this record renders so)")  # fmt: skip
    if record.effort_texts:
        print(f"V4 effort texts: {record.effort_texts} (every plan with this record uses them)")
    if record.tool_arguments:
        form = "a JSON object" if record.tool_arguments == "object" else "JSON text"
        print(f"tool-call arguments reach the template as {form} (every plan with this "
              f"record renders them so: tool_arguments={record.tool_arguments!r})")  # fmt: skip
    if record.settings_check and record.settings_check != "verified":
        print(f"settings check: {record.settings_check}")
    if record.server or record.chat_template_sha256:
        template = record.chat_template_sha256
        print(f"server: {record.server or 'not recognised'}"
              + (f"; chat template sha256 {template[:16]}..." if template else ""))  # fmt: skip
    if record.served_model or record.system_fingerprint:
        print(f"served: model {record.served_model!r}, system_fingerprint "
              f"{record.system_fingerprint!r} (the usage check warns when they change)")  # fmt: skip
    if not args.no_save:
        print(f"record: {record_path(record.base_url, record.model)}")
    return 0
