"""Small hardening items: stale temp files, redaction, user-file reads, strict JSON."""

from __future__ import annotations

import os
import time

import pytest

from phaseaware.atomic import STALE_SECONDS, atomic_write_text, own_temp_name
from phaseaware.errors import InputError, ProfileError
from phaseaware.redact import redact, redact_url
from phaseaware.userfiles import MAX_DEPTH, parse_json_document, read_user_bytes, read_user_text


def test_killed_writes_leave_no_temp_files_behind(tmp_path) -> None:
    """Only phaseaware's own stale temps go; files named like the old ``.NAME.*.tmp`` form
    are a user's (issue 38: they were deleted by a glob over the output name)."""
    target = tmp_path / "profile.json"
    stale = tmp_path / own_temp_name()  # what a SIGKILLed writer leaves
    fresh = tmp_path / own_temp_name()  # a writer still at work
    users = tmp_path / ".profile.json.abc123.tmp"  # a user's file, not ours
    for path in (stale, fresh, users):
        path.write_text("partial")
    old = time.time() - STALE_SECONDS - 5
    os.utime(stale, (old, old))
    os.utime(users, (old, old))
    atomic_write_text(target, "{}")
    assert target.read_text() == "{}"
    assert not stale.exists() and fresh.exists() and users.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["profile.json", fresh.name, users.name]
    )


@pytest.mark.parametrize(
    ("text", "hidden"),
    [
        ("cannot reach http://alice:s3cret@example.com:8000/v1 (refused)", "s3cret"),
        ("see https://token@host/v1/models", "token@"),
        ("header Authorization: Bearer abc.def-123", "abc.def-123"),
        ("header Authorization: Bearer one  twospace0002", "twospace0002"),
        ("Illegal header value b'Bearer key with\ttab' (bad)", "tab"),
        ('{"Authorization": "Bearer a b c"}', " b c"),
        ("key sk-proj-ABCDEFGHIJKLMNOP rejected", "ABCDEFGHIJKLMNOP"),
    ],
)
def test_redact(text: str, hidden: str) -> None:
    assert hidden not in redact(text) and "***" in redact(text)


def test_redact_url_keeps_host_and_port() -> None:
    assert redact_url("http://u:p@h:81/v1") == "http://***@h:81/v1"
    assert redact_url("http://h/v1") == "http://h/v1"


def test_openai_backend_errors_are_redacted() -> None:
    from phaseaware.calibration.backends.openai import OpenAIBackend
    from phaseaware.errors import BackendError

    with pytest.raises(BackendError) as info:
        OpenAIBackend("ftp://alice:s3cret@h/v1", "m")
    assert "s3cret" not in str(info.value)
    backend = OpenAIBackend("http://alice:s3cret@127.0.0.1:9/v1", "m", api_key="sk-secretkey123")
    try:
        assert "s3cret" not in repr(backend)
    finally:
        backend.close()


def test_read_user_file_refuses_what_is_not_a_regular_file(tmp_path) -> None:
    with pytest.raises(InputError, match="is a folder"):
        read_user_bytes(tmp_path, what="request file")
    with pytest.raises(InputError, match="does not exist"):
        read_user_bytes(tmp_path / "nope", what="request file")
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(InputError, match="symlink loop"):
        read_user_bytes(loop)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="not a regular file"):
        read_user_bytes(fifo)  # returns at once: never blocks on a FIFO
    with pytest.raises(ProfileError, match="not a regular file"):
        read_user_bytes("/dev/zero", error=ProfileError)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(InputError, match="over the 100-byte limit"):
        read_user_bytes(big, max_bytes=100)
    bad = tmp_path / "bad"
    bad.write_bytes(b"\xff")
    with pytest.raises(InputError, match="not valid UTF-8"):
        read_user_text(bad)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": 1, "a": 2}', "duplicate key 'a'"),
        ('{"a": NaN}', "NaN is not allowed"),
        ('{"a": 1e400}', "too large"),
        ('{"a": ' + "9" * 401 + "}", "too large"),
        ('{"a": "\\udc00"}', "lone surrogate"),
        ('{"\\ud800": 1}', "lone surrogate"),
        ("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1), "nested deeper"),
        ("{", "not valid JSON"),
    ],
)
def test_strict_json(text: str, message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_json_document(text, source="doc")


def test_strict_json_accepts_ordinary_documents() -> None:
    doc = parse_json_document('{"a": [1, 2.5, "x", null, {"b": "[{"}]}', source="doc")
    assert doc == {"a": [1, 2.5, "x", None, {"b": "[{"}]}
    nested = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert parse_json_document(nested, source="doc") is not None


def test_chunk_score_overflow_from_python() -> None:
    from phaseaware.assembly.inputs.chunks import Chunk, normalize_chunks

    with pytest.raises(InputError, match="too large"):
        normalize_chunks([Chunk(text="x", score=10**401)])
    with pytest.raises(InputError, match="surrogate"):
        normalize_chunks([Chunk(text="x", id="\ud800")])


def test_log_header_refuses_credentials() -> None:
    from phaseaware.calibration.log import _check_no_secret
    from phaseaware.errors import LogError

    _check_no_secret('{"model": "m", "backend": "openai-http"}')
    with pytest.raises(LogError, match="refusing to write credentials"):
        _check_no_secret('{"model": "http://u:p@h/v1"}')


def test_redact_url_keeps_the_host_as_written() -> None:
    from phaseaware.redact import redact_url

    assert redact_url("http://u:p@[::1]:8000/v1") == "http://***@[::1]:8000/v1"
    assert redact_url("https://user:pw@Host.example/v1") == "https://***@Host.example/v1"


def test_one_url_redaction_rule_for_messages_and_records() -> None:
    from phaseaware.endpoints import redact_url as record_rule
    from phaseaware.redact import redact_url

    assert record_rule is redact_url
    url = "https://u:p@host/v1?api_key=abc&x=1&token=t"
    assert redact_url(url) == "https://***@host/v1?api_key=***&x=1&token=***"
    assert redact_url("http://[::1") == "<unparseable url>"
