"""Entry point: builds the parser from the command modules and maps errors to exit codes.

Exit codes: 0 success, 2 usage error (argparse), 1 any other error, printed as
one line ``phaseaware: error: <cause and fix>``.

Each command module exposes ``NAME``, ``HELP``, ``configure(parser)`` and
``run(args) -> int``, and must import nothing heavy at module level.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import importlib
import os
import sys
import warnings
from collections.abc import Sequence
from typing import TextIO

from phaseaware.errors import PhaseawareError
from phaseaware.redact import redact

# One list, in help order. A command module that fails to import is a bug, not
# an optional feature: heavy dependencies are imported inside ``run``.
COMMAND_MODULES: tuple[str, ...] = (
    "phaseaware.cli.assemble_cmd",
    "phaseaware.cli.audit_cmd",
    "phaseaware.cli.profile_cmd",
    "phaseaware.cli.calibrate_cmd",
    "phaseaware.cli.score_cmd",
    "phaseaware.cli.serve_cmd",
    "phaseaware.cli.compare_cmd",
    "phaseaware.cli.demo_cmd",
    "phaseaware.cli.probe_endpoint_cmd",
)


def build_parser() -> argparse.ArgumentParser:
    from phaseaware.version import __version__

    parser = argparse.ArgumentParser(
        prog="phaseaware",
        description="Phase-aware, token-exact context assembly for chunk-compressed LLMs.",
        allow_abbrev=False,
    )
    parser.add_argument("-V", "--version", action="version", version=f"phaseaware {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module_name in COMMAND_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name == module_name:
                continue  # command not built yet
            raise
        cmd = sub.add_parser(
            module.NAME,
            help=module.HELP,
            description=module.HELP,
            allow_abbrev=False,  # a flag is spelt out: no silent prefixes
            formatter_class=DefaultsHelpFormatter,
        )
        module.configure(cmd)
        cmd.usage = short_usage(cmd)
        cmd.set_defaults(_run=module.run)
    return parser


def short_usage(parser: argparse.ArgumentParser) -> str | None:
    """``prog [required flags] [options] positionals``: one line, not every flag (``--help``
    lists them in groups); ``None`` (argparse's own) for a command with subcommands."""
    words, positionals = [parser.prog], []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return None
        if not action.option_strings:
            name = action.metavar or action.dest
            positionals.append(f"[{name}]" if action.nargs in ("?", "*") else str(name))
        elif action.required:
            words.append(f"{action.option_strings[0]} {action.metavar or action.dest.upper()}")
    return " ".join([*words, "[options]", *positionals])


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """``--help`` shows every default: ``(default: X)`` after a help text that names none
    (flags off by default and unset optional values show nothing)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            "default" in text.lower()
            or default is None
            or default is False
            or default == argparse.SUPPRESS
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)" if text else "(default: %(default)s)"


def parse_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """Parse; a flag the command does not know is refused with the COMMAND's usage and the
    nearest flag it has (argparse alone prints the top-level usage for it)."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    words = list(sys.argv[1:] if argv is None else argv)
    named = next((w for w in words if w in sub.choices), None)
    if named is not None:
        # argparse reports a missing required flag before an unknown one: a typo in a
        # required flag (--budget-token) would then hide the one line that names the fix
        command = sub.choices[named]
        typos = unknown_flags(words[words.index(named) + 1 :], command)
        if typos and missing_required(words, command):
            command.error(unrecognized(typos, command))
    args, extras = parser.parse_known_args(argv)
    if extras:
        command = sub.choices[args.command]
        command.error(unrecognized(extras, command))
    return args


def unknown_flags(words: Sequence[str], parser: argparse.ArgumentParser) -> list[str]:
    """The ``--flags`` among ``words`` (up to a ``--``) that ``parser`` does not know."""
    found: list[str] = []
    for word in words:
        if word == "--":
            break
        flag = word.split("=")[0]
        if flag.startswith("--") and flag not in parser._option_string_actions:
            found.append(flag)
    return found


def missing_required(words: Sequence[str], parser: argparse.ArgumentParser) -> bool:
    """Whether a required flag of ``parser`` is absent from ``words``."""
    given = {word.split("=")[0] for word in words}
    return any(
        action.required and action.option_strings and given.isdisjoint(action.option_strings)
        for action in parser._actions
    )


def unrecognized(extras: Sequence[str], parser: argparse.ArgumentParser) -> str:
    """``unrecognized arguments: X`` with ``did you mean --Y?`` for the first unknown flag."""
    message = f"unrecognized arguments: {' '.join(extras)}"
    flags = [word.split("=")[0] for word in extras if word.startswith("-")]
    known = [f for f in parser._option_string_actions if f.startswith("--")]
    for flag in flags:
        near = difflib.get_close_matches(flag, known, n=1, cutoff=0.6)
        if near:
            return f"{message}; did you mean {near[0]}?"
    return message


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parse_args(parser, argv)
    with contextlib.ExitStack() as stack:
        if getattr(args, "trust_profiles", False):
            from phaseaware.profiles.trust import trusting_profiles

            stack.enter_context(trusting_profiles())
        stack.enter_context(warnings.catch_warnings())
        warnings.showwarning = _show_warning
        return _run(args)


def _show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Warnings as one line ``phaseaware: warning: ...`` on stderr (no source line)."""
    text = " ".join(redact(str(message)).split())
    print(f"phaseaware: warning: {text}", file=sys.stderr)


def _run(args: argparse.Namespace) -> int:
    try:
        code = int(args._run(args) or 0)
        sys.stdout.flush()
        return code
    except PhaseawareError as exc:
        return _fail(str(exc))
    except KeyboardInterrupt:
        print("phaseaware: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _closed_pipe()
    except ModuleNotFoundError as exc:  # an optional dependency: name its extra
        from phaseaware.extras import missing_extra_error

        teaching = missing_extra_error(exc)
        if teaching is None:
            return _unexpected(exc)
        return _fail(str(teaching))
    except Exception as exc:  # last resort: no traceback reaches a user
        return _unexpected(exc)


def _unexpected(exc: Exception) -> int:
    if os.environ.get("PHASEAWARE_DEBUG"):
        raise exc
    return _fail(
        f"unexpected {type(exc).__name__}: {exc}; this is a bug, please report it "
        "(set PHASEAWARE_DEBUG=1 to see the traceback)"
    )


def _fail(message: str) -> int:
    """Print ``phaseaware: error: <message>`` as one line (credentials redacted); 1."""
    line = " ".join(redact(message).split())
    print(f"phaseaware: error: {line}", file=sys.stderr)
    return 1


def _closed_pipe() -> int:
    """The reader went away (``| head``): stop quietly, as the Python docs advise."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout is not a real file (in-process callers)
        pass
    return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
