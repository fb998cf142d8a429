"""Hostile input, round 5 (issue 38): a property over random inputs and random servers.

For random bytes and random JSON values as the file a command reads, and random replies
from a server on loopback, every command either succeeds or exits with one line: no
"this is a bug", no traceback (``PHASEAWARE_DEBUG=1`` lets an unexpected exception out,
so hypothesis shows and shrinks it), within a time bound (hypothesis's deadline) and a
memory bound (tracemalloc's peak). Kept CI-fast: few examples, tiny inputs, one server.
"""

from __future__ import annotations

import contextlib
import io
import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.cli.main import main
from phaseaware.profiles.registry import builtin_profile_dir
from tests.support.hostile_http import start_hostile

TOKENIZER = "tiktoken:cl100k_base"
PROFILE = builtin_profile_dir() / "deepseek-v4-flash-base.json"
PEAK_BYTES = 256 << 20
FAST = settings(
    max_examples=12,
    deadline=20_000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    derandomize=True,
)

leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=30)
)
json_values = st.recursive(
    leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),  # fmt: skip
    max_leaves=12,
)
KEYS = ["prompt", "messages", "needle", "correct", "id", "data", "input_text", "answer",
        "file_name", "score", "question", "chunks", "choices", "tokens", "outputs", "input",
        "doc", "arguments", "metrics", "filter", "exact_match"]  # fmt: skip
records = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6)


def _main(args: list[str]) -> tuple[int, str]:
    """``main(args)`` with its output captured, its peak memory bounded, and the one-line
    rule checked; an unexpected exception propagates (PHASEAWARE_DEBUG=1)."""
    err = io.StringIO()
    tracemalloc.start()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = main(args)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    text = err.getvalue()
    assert "this is a bug" not in text and "Traceback" not in text, text
    assert code in (0, 1), (code, text)
    if code == 1:
        lines = [line for line in text.splitlines() if line.startswith("phaseaware: error: ")]
        assert len(lines) == 1, text
    assert peak < PEAK_BYTES, f"{peak >> 20} MiB"
    return code, text


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PHASEAWARE_DEBUG", "1")
    (tmp_path / "contexts").mkdir()
    return tmp_path


def _score(fmt: str, path: str) -> list[str]:
    return ["score", "--format", fmt, "--tokenizer", TOKENIZER, "--chat-format", "chatml",
            "--period", "2", path]  # fmt: skip


SCORE_FILES = {"jsonl": "e.jsonl", "ruler": "e.jsonl", "lm-eval": "samples_t.jsonl",
               "helmet": "h.json", "niah": "n_results.json"}  # fmt: skip


@FAST
@given(data=st.binary(max_size=400), fmt=st.sampled_from(sorted(SCORE_FILES)))
def test_score_on_random_bytes(folder, data, fmt):
    name = SCORE_FILES[fmt]
    (folder / name).write_bytes(data)
    _main(_score(fmt, name))


@FAST
@given(lines=st.lists(records | json_values, min_size=1, max_size=5),
       fmt=st.sampled_from(sorted(SCORE_FILES)))  # fmt: skip
def test_score_on_random_json(folder, lines, fmt):
    name = SCORE_FILES[fmt]
    if name.endswith(".jsonl"):
        text = "".join(json.dumps(line) + "\n" for line in lines)
    else:
        text = json.dumps(lines[0] if len(lines) == 1 else {"data": lines, "file_name": "c"})
    (folder / name).write_text(text, encoding="utf-8")
    (folder / "contexts" / "c_context.txt").write_text("a K1x b", encoding="utf-8")
    _main(_score(fmt, name))


def _assemble_args(path: str) -> list[str]:
    return ["assemble", path]


@FAST
@given(value=records | json_values, raw=st.binary(max_size=200), as_bytes=st.booleans())
def test_assemble_and_compare_on_random_files(folder, value, raw, as_bytes):
    data = raw if as_bytes else (json.dumps(value) + "\n").encode()
    (folder / "r.json").write_bytes(data)
    _main(_assemble_args("r.json"))
    (folder / "q.jsonl").write_bytes(data)
    (folder / "r5p_backend.py").write_text("def answer(prompt):\n    return '42'\n")
    with _on_path(folder):
        _main(["compare", "q.jsonl", "--budget-tokens", "200", "--tokenizer", "deepseek-v4",
               "--chat-format", "deepseek-v4", "--profile", str(PROFILE), "--backend",
               "callable", "--model", "r5p_backend:answer", "--fresh", "--log", "c.jsonl"])  # fmt: skip


@contextlib.contextmanager
def _on_path(folder: Path) -> Iterator[None]:
    import sys

    sys.path.insert(0, str(folder))
    try:
        yield
    finally:
        sys.path.remove(str(folder))


# --- random server replies -------------------------------------------------------------

replies = st.one_of(
    json_values.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=64),
    st.fixed_dictionaries(
        {},
        optional={
            "choices": json_values | st.lists(st.fixed_dictionaries(
                {}, optional={"message": json_values | records, "text": json_values}),
                max_size=2),
            "usage": json_values | st.fixed_dictionaries({"prompt_tokens": json_values}),
            "tokens": json_values | st.lists(st.integers(-5, 2**64) | st.booleans(), max_size=4),
            "token_ids": st.lists(st.integers(-5, 300) | leaves, max_size=4),
            "token_offsets": json_values,
            "build_info": st.text(max_size=50),
            "prompt": json_values,
        },
    ).map(lambda d: json.dumps(d).encode()),
)  # fmt: skip


class _Reply:
    """The body every request gets; set per example."""

    body: bytes = b"{}"

    def __call__(self) -> bytes:
        return self.body


REPLY = _Reply()


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with start_hostile("json", body=REPLY) as hostile:
        yield hostile.base_url


def _server_commands(url: str, folder: Path) -> list[list[str]]:
    net = ["--timeout", "2"]
    return [
        _score("jsonl", "m.jsonl")[:-3] + ["--server", url, "--model", "m", "m.jsonl", *net],
        ["calibrate", "--backend", "openai", "--base-url", url, "--model", "m", "--tokenizer",
         TOKENIZER, "--chat-format", "chatml", "--context-tokens", "160", "--base-prompts", "1",
         "--period", "2", "--sweeps", "key", "--concurrency", "1", "--max-retries", "0",
         "--out", str(folder / "p.json"), "--log", str(folder / "c.jsonl"), "--fresh", *net],
        ["probe-endpoint", "--base-url", url, "--model", "m", "--tokenizer", TOKENIZER,
         "--chat-format", "chatml", "--mode", "auto", "--no-save", *net],
    ]  # fmt: skip


@FAST
@given(reply=replies, which=st.integers(0, 2))
def test_every_command_on_random_server_replies(folder, server, reply, which):
    REPLY.body = reply
    doc = {"messages": [{"role": "user", "content": "a K1x b"}], "needle": "K1x", "correct": True}
    (folder / "m.jsonl").write_text(json.dumps(doc) + "\n", encoding="utf-8")
    _main(_server_commands(server, folder)[which])


def test_the_server_property_sees_its_replies(folder, server):
    """The property is not vacuous: a well-formed reply gets a command through."""
    REPLY.body = json.dumps({"tokens": [64, 220, 42, 16, 87, 293]}).encode()
    doc = {"messages": [{"role": "user", "content": "a K1x b"}], "needle": "K1x", "correct": True}
    (folder / "m.jsonl").write_text(json.dumps(doc) + "\n", encoding="utf-8")
    code, text = _main(_server_commands(server, folder)[0])
    assert code == 1 and "no sample could be placed" in text and "no token id" not in text
