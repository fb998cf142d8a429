"""Hostile input, round 5 (issue 38): what a server sends is checked before use.

The cases that found the causes, each against a real socket server on loopback
(:mod:`tests.support.hostile_http`, every request answered with the same body):
``/tokenize`` ids that are negative, above 2^63 or booleans, a body labelled JSON that is
not, render-route offsets that are not pairs or are infinite, ``/props`` ``build_info``
with ANSI escapes and 15 MB, and ``{"choices": "nope"}`` taken by ``compare`` and
``calibrate`` as an empty answer.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from phaseaware.calibration.backends.shape import MalformedResponse, response_text
from phaseaware.cli.main import main
from phaseaware.endpoints.values import check_token_ids, offset_pairs, shown_text
from phaseaware.errors import EndpointError
from tests.support.hostile_http import start_hostile

pytest.importorskip("openai")

TOKENIZER = "tiktoken:cl100k_base"


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "this is a bug" not in err, err
    if code == 1:
        errors = [line for line in err.splitlines() if not line.startswith("phaseaware: warning")]
        assert len(errors) == 1 and errors[0].startswith("phaseaware: error: "), err
    return code, out, err


@pytest.fixture()
def messages_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    doc = {"messages": [{"role": "user", "content": "a K1x b"}], "needle": "K1x", "correct": True}
    (tmp_path / "m.jsonl").write_text(json.dumps(doc) + "\n", encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize(
    ("body", "shown"),
    [
        (b'{"tokens": [1, -3, 2]}', "-3 as token 1"),
        (b'{"tokens": [1, 18446744073709551616]}', "an integer of 20 digits"),
        (b'{"tokens": [true, false]}', "True as token 0"),
        (b'{"tokens": [1.5]}', "1.5 as token 0"),
        (b"<html>not json</html>", "failed"),
    ],
)
def test_score_server_tokens_are_checked(messages_log, capsys, body, shown):
    with start_hostile("json", body=body) as server:
        code, _, err = _run(
            ["score", "--format", "jsonl", "--tokenizer", TOKENIZER, "m.jsonl", "--chat-format",
             "chatml", "--server", server.base_url, "--model", "m", "--timeout", "5"],
            capsys,
        )  # fmt: skip
    assert code == 1 and shown in err and "/tokenize" in err


def test_ids_outside_the_vocabulary_are_a_named_skip(messages_log, capsys):
    with start_hostile("json", body=b'{"tokens": [2000000000]}') as server:
        code, _, err = _run(
            ["score", "--format", "jsonl", "--tokenizer", TOKENIZER, "m.jsonl", "--chat-format",
             "chatml", "--server", server.base_url, "--model", "m", "--timeout", "5"],
            capsys,
        )  # fmt: skip
    assert code == 1 and "server-tokens 1" in err


def test_token_id_rules():
    assert check_token_ids([0, 5, 2**31 - 1], source="s") == [0, 5, 2**31 - 1]
    for bad in ([-1], [True], [2**31], [None], ["3"], [2.0]):
        with pytest.raises(EndpointError, match="no token id"):
            check_token_ids(bad, source="s")


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        ([[0, 1], "x"], "not a [start, end] pair"),
        ([[0, 1], [1, 2, 3]], "not a [start, end] pair"),
        ([[0, float("inf")], [1, 2]], "not a character span"),
        ([[0, 1], [2, 1]], "not a character span"),
        ([[0, 1], [-1, 2]], "not a character span"),
        ([[0, 1], [True, 2]], "not a character span"),
        ([[0, 1]], "not a list of 2 spans"),
    ],
)
def test_offset_pairs_say_why_they_are_unusable(raw, why):
    offsets, problem = offset_pairs(raw, count=2)
    assert offsets is None and why in problem
    assert offset_pairs([[0, 1], [1, 2]], count=2) == (((0, 1), (1, 2)), "")


@pytest.mark.parametrize(
    "offsets", [b'[[0, 1], "x"]', b"[[0, Infinity], [1, 2]]", b"[[0, 1e400], [1, 2]]"]
)
def test_render_route_offsets_that_are_not_spans_are_noted_not_crashed(offsets):
    from phaseaware.endpoints.probe import make_client
    from phaseaware.endpoints.render_route import check_offsets, render_ids
    from phaseaware.tokenizers import load_tokenizer

    body = b'{"token_ids": [64, 65], "token_offsets": ' + offsets + b"}"
    with start_hostile("json", body=body) as server:
        client = make_client(server.base_url, timeout=5)
        rendered = render_ids(
            client, model="m", messages=[{"role": "user", "content": "ab"}],
            base=server.base_url, kwargs=None,
        )  # fmt: skip
    assert rendered.ids == (64, 65) and rendered.offsets is None
    note = check_offsets(load_tokenizer(TOKENIZER).tokenize("ab"), rendered)
    assert note.startswith("token offsets: not used")


def test_props_build_info_is_escaped_and_cut():
    from phaseaware.endpoints.probe import make_client
    from phaseaware.endpoints.server import server_identity

    hostile = "\x1b[31mEVIL\r\nFAKE: ok\x1b]0;title\x07" + "x" * (15 << 20)
    body = json.dumps({"build_info": hostile, "chat_template": "{{ x }}"}).encode()
    start = time.monotonic()
    with start_hostile("json", body=body) as server:
        found = server_identity(make_client(server.base_url, timeout=10), server.base_url)
    assert found is not None
    assert "\x1b" not in found.name and "\r" not in found.name and "\n" not in found.name
    assert found.name.startswith("llama.cpp llama-server \\x1b[31mEVIL\\x0d\\x0aFAKE")
    assert len(found.name) < 200 and "more characters" in found.name
    assert time.monotonic() - start < 30


def test_a_non_json_props_body_is_no_server_identity():
    from phaseaware.endpoints.probe import make_client
    from phaseaware.endpoints.server import server_identity

    with start_hostile("json", body=b"{not json") as server:
        assert server_identity(make_client(server.base_url, timeout=5), server.base_url) is None


def test_shown_text_escapes_every_control_character():
    text = "a\x00b\x1b[0m\u2028\u202e\x85\x7f" + "z" * 500
    shown = shown_text(text, limit=20)
    assert shown.isprintable() and "more characters" in shown


# --- malformed responses are never answers -------------------------------------------


@pytest.mark.parametrize(
    ("response", "endpoint", "why"),
    [
        ({"choices": "nope"}, "chat", "choices is str"),
        ({"choices": []}, "chat", "choices is empty"),
        ({"choices": ["n"]}, "chat", "choices[0] is str"),
        ({"choices": [{"message": "hi"}]}, "chat", "message is str"),
        ({"choices": [{"message": {"content": 5}}]}, "chat", "content is int"),
        ({"choices": [{"message": {"content": [{"type": "image_url"}]}}]}, "chat", "text part"),
        ({"choices": [{"text": ["a"]}]}, "completions", "text is list"),
        ("nope", "chat", "not a JSON object"),
    ],
)
def test_response_shapes_are_checked(response, endpoint, why):
    with pytest.raises(MalformedResponse, match=why.replace("[", r"\[").replace("]", r"\]")):
        response_text(response, endpoint=endpoint)


def test_documented_response_shapes_are_read():
    parts = {"content": [{"type": "text", "text": "4"}, {"type": "text", "text": "2"}]}
    assert response_text({"choices": [{"message": parts}]}, endpoint="chat") == "42"
    assert response_text({"choices": [{"message": {"content": None}}]}, endpoint="chat") == ""
    assert response_text({"choices": [{"text": "42"}]}, endpoint="completions") == "42"


@pytest.mark.parametrize("body", [b'{"choices": "nope"}', b'{"choices": [{"message": 1}]}'])
def test_compare_takes_a_malformed_response_as_an_error(tmp_path, monkeypatch, capsys, body):
    """36 answers of ``{"choices": "nope"}`` were logged as "" and a verdict printed."""
    monkeypatch.chdir(tmp_path)
    questions = [{"id": f"q{i}", "question": "what?", "answer": ["42"],
                  "chunks": [{"id": "a", "text": "alpha 42", "evidence": ["42"]}]}
                 for i in range(3)]  # fmt: skip
    (tmp_path / "q.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    from phaseaware.profiles.registry import builtin_profile_dir

    profile = builtin_profile_dir() / "deepseek-v4-flash-base.json"
    with start_hostile("json", body=body) as server:
        code, out, err = _run(
            ["compare", "q.jsonl", "--budget-tokens", "200", "--tokenizer", "deepseek-v4",
             "--chat-format", "deepseek-v4", "--profile", str(profile), "--backend", "openai",
             "--base-url", server.base_url, "--model", "m", "--log", "c.jsonl",
             "--timeout", "5", "--max-retries", "0"],
            capsys,
        )  # fmt: skip
    assert code == 1 and "malformed response" in err and "verdict" not in out.lower()
    logged = (tmp_path / "c.jsonl").read_text(encoding="utf-8").split("\n")
    assert len([line for line in logged if line]) == 1  # the header only: no answer logged


def test_calibrate_takes_a_malformed_response_as_an_error(tmp_path, capsys):
    with start_hostile("json", body=b'{"choices": "nope"}') as server:
        code, _, err = _run(
            ["calibrate", "--backend", "openai", "--base-url", server.base_url, "--model", "m",
             "--tokenizer", TOKENIZER, "--chat-format", "chatml", "--context-tokens", "160",
             "--base-prompts", "1", "--period", "2", "--sweeps", "key", "--concurrency", "1",
             "--out", str(tmp_path / "p.json"), "--log", str(tmp_path / "c.jsonl"),
             "--timeout", "5", "--max-retries", "0"],
            capsys,
        )  # fmt: skip
    assert code == 1 and "malformed response" in err and "choices is str" in err
    assert not (tmp_path / "p.json").exists()


def test_a_mismatch_names_the_route_the_ids_came_from():
    """The error said "/tokenize" when the ids came from the render route; ids beyond the
    vocabulary are named without decoding them (it crashed the tokenizer)."""
    from phaseaware.endpoints.defaults import TemplateMismatchError, compare_tokens
    from phaseaware.tokenizers import load_tokenizer

    tok = load_tokenizer(TOKENIZER)
    with pytest.raises(TemplateMismatchError, match="^the render endpoint of u differs") as info:
        compare_tokens([2_000_000_000, 5], [7, 8], tok, url="u", source="the render endpoint")
    assert "id 2000000000" in str(info.value)
