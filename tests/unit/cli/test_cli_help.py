"""The command line as a newcomer meets it: flags spelt out, typos taught, defaults shown."""

from __future__ import annotations

import pytest

from phaseaware.cli.main import main


def test_an_abbreviated_flag_is_refused_not_guessed(capsys):
    with pytest.raises(SystemExit) as info:
        main(["calibrate", "--max-tok", "3", "--plan"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: phaseaware calibrate")  # the command's usage, not the top's
    assert "unrecognized arguments: --max-tok 3; did you mean --max-tokens?" in err


def test_a_typo_gets_the_commands_usage_and_the_nearest_flag(capsys):
    with pytest.raises(SystemExit):
        main(["compare", "q.jsonl", "--profile", "p", "--budget-tokens", "64", "--max-token", "8"])
    err = capsys.readouterr().err
    assert err.startswith("usage: phaseaware compare")
    assert "did you mean --max-tokens?" in err


def test_a_typo_in_a_required_flag_is_named_not_hidden_by_the_missing_flag(capsys):
    with pytest.raises(SystemExit) as info:
        main(["compare", "q.jsonl", "--profile", "p", "--budget-token", "64"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: phaseaware compare")
    assert "unrecognized arguments: --budget-token; did you mean --budget-tokens?" in err


@pytest.mark.parametrize(
    ("command", "shown"),
    [
        ("compare", ["--backend {hf,openai,callable}", "(default: openai)", "(default: 16)"]),
        ("calibrate", ["(default hf)", "(default 5)", "--seed SEED probe seed (default: 0)"]),
        ("serve-reference", ["(default: 8000)"]),
    ],
)
def test_help_shows_the_defaults(capsys, command, shown):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for text in shown:
        assert " ".join(text.split()) in out, text


def test_a_refused_connection_is_one_line_with_the_command_that_starts_a_server(capsys):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    pytest.importorskip("openai")
    assert main(["probe-endpoint", "--base-url", url, "--model", "m",
                 "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml"]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "connection refused" in err
    assert "phaseaware serve-reference --port 8000" in err and "***" not in err
