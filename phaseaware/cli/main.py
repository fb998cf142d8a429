"""Entry point: builds the parser from the command modules and maps errors to exit codes.

Exit codes: 0 success, 2 usage error (argparse), 1 any other error, printed as
one line ``phaseaware: error: <cause and fix>``.

Each command module exposes ``NAME``, ``HELP``, ``configure(parser)`` and
``run(args) -> int``, and must import nothing heavy at module level.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from phaseaware.errors import PhaseawareError

# One list, in help order. A command module that fails to import is a bug, not
# an optional feature: heavy dependencies are imported inside ``run``.
COMMAND_MODULES: tuple[str, ...] = (
    "phaseaware.cli.assemble_cmd",
    "phaseaware.cli.audit_cmd",
    "phaseaware.cli.profile_cmd",
    "phaseaware.cli.calibrate_cmd",
    "phaseaware.cli.serve_cmd",
    "phaseaware.cli.demo_cmd",
    "phaseaware.cli.probe_endpoint_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    from phaseaware.version import __version__

    parser = argparse.ArgumentParser(
        prog="phaseaware",
        description="Phase-aware, token-exact context assembly for chunk-compressed LLMs.",
    )
    parser.add_argument("--version", action="version", version=f"phaseaware {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # command not built yet
            raise
        cmd = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.configure(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args._run(args) or 0)
    except PhaseawareError as exc:
        message = str(exc).replace("\n", " ")
        print(f"phaseaware: error: {message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("phaseaware: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
