"""Flags shared by several commands, and renamed flags that keep working for now.

``--chat-format F`` names the chat format (``none``, ``chatml``, ``hf``,
``deepseek-v4``, ``deepseek-v4.1``, or a registered one) everywhere; ``--template
F``, its former name, still works and prints one line on stderr: ``phaseaware:
`--template` is deprecated; use `--chat-format```.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

__all__ = ["add_chat_format"]


class _Renamed(argparse.Action):
    """Stores into the new flag's ``dest`` after one deprecation line on stderr."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        self.new_flag = kwargs.pop("new_flag")
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        print(
            f"phaseaware: `{option_string}` is deprecated; use `{self.new_flag}`", file=sys.stderr
        )
        setattr(namespace, self.dest, values)


def add_chat_format(parser: argparse.ArgumentParser, *, help: str, required: bool = False) -> None:
    """``--chat-format F`` (into ``args.chat_format``) and its deprecated alias ``--template``
    (one of the two; ``required``: one must be given)."""
    group = parser.add_mutually_exclusive_group(required=required)
    group.add_argument("--chat-format", dest="chat_format", metavar="F", help=help)
    group.add_argument(
        "--template",
        dest="chat_format",
        metavar="F",
        action=_Renamed,
        new_flag="--chat-format",
        help=argparse.SUPPRESS,
    )
