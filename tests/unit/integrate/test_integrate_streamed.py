"""phaseaware.integrate.StreamedReply: a chat-completion event stream read as it passes.

The stream is written as vLLM 0.32 writes one (``serving.py``: the prompt's ids on the
first chunk, ``exclude_unset`` JSON, the usage chunk last, ``data: [DONE]``). Every way of
cutting it into pieces gives the same reply; a slow reference parser (whole text, split
on blank lines) is the oracle."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.integrate import KeptReply, StreamedReply, UsagePlans, rendered_ids, target_of

IDS = [0, 1820, 7, 99_999, 128_000]


def _events(*, ids: list[int] | None = IDS, usage: bool = True, text: str = "4000-A") -> list[Any]:
    head = {"id": "chatcmpl-7", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    first = chunk({"role": "assistant", "content": ""})
    if ids is not None:
        first["prompt_token_ids"] = ids
    out = [first, *(chunk({"content": c}) for c in text), chunk({}, "stop")]
    out[-1]["system_fingerprint"] = "fp-1"
    if usage:
        out.append({**head, "choices": [], "usage": {"prompt_tokens": len(IDS), "total_tokens": 9}})
    return out


def _stream(events: list[Any], *, newline: bytes = b"\n") -> bytes:
    lines = [b"data: " + json.dumps(e).encode() + newline + newline for e in events]
    return b"".join(lines) + b"data: [DONE]" + newline + newline


def _reference(data: bytes) -> KeptReply | None:
    """The whole stream at once: events split on blank lines, chunks merged by hand."""
    body: dict[str, Any] = {}
    text = data.decode().replace("\r\n", "\n")
    chunks = [
        json.loads(e.removeprefix("data: ")) for e in text.split("\n\n") if e.startswith("data: {")
    ]
    if not chunks:
        return None
    body.update({k: chunks[0][k] for k in ("id", "model") if k in chunks[0]})
    for c in chunks:
        body.update({k: c[k] for k in ("usage", "system_fingerprint") if c.get(k) is not None})
    if "prompt_token_ids" in chunks[0]:
        body["prompt_token_ids"] = chunks[0]["prompt_token_ids"]
    return KeptReply.of(body)


def _read(data: bytes, cuts: list[int], **kwargs: Any) -> StreamedReply:
    reader = StreamedReply(**kwargs)
    edges = [0, *sorted(c % (len(data) + 1) for c in cuts), len(data)]
    for a, b in zip(edges, edges[1:], strict=False):
        reader.feed(data[a:b])
    reader.close()
    return reader


@settings(max_examples=200, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=12),
    crlf=st.booleans(),
    ids=st.sampled_from([IDS, None]),
    usage=st.booleans(),
)
def test_any_cut_reads_the_reply_the_whole_stream_holds(
    cuts: list[int], crlf: bool, ids: list[int] | None, usage: bool
) -> None:
    data = _stream(_events(ids=ids, usage=usage), newline=b"\r\n" if crlf else b"\n")
    reader = _read(data, cuts)
    assert reader.done and not reader.overflowed
    assert reader.kept() == _reference(data)


def test_what_a_check_reads() -> None:
    kept = _read(_stream(_events()), [3, 50, 51]).kept()
    assert kept is not None
    assert kept.body() == {
        "id": "chatcmpl-7", "model": "m", "system_fingerprint": "fp-1",
        "usage": {"prompt_tokens": len(IDS), "total_tokens": 9}, "prompt_token_ids": IDS,
    }  # fmt: skip
    assert kept.reply_id == "chatcmpl-7" and kept.prompt_tokens == len(IDS)
    # the usage plans compare them id for id, as a non-streamed body's
    target = target_of({"tokenizer": "tiktoken:o200k_base", "chat_format": "chatml"})
    messages = [{"role": "user", "content": "Below which voltage is Helios-3 disabled?"}]
    planned = rendered_ids(target, messages)
    body = {**kept.body(), "prompt_token_ids": planned, "usage": {"prompt_tokens": len(planned)}}
    plans = UsagePlans(target, on_mismatch="raise")
    plans.start("run", messages)
    check = plans.end("run", reported_tokens=len(planned), raw=body)
    assert check is not None and check.ids_compared and check.ok


def test_done_ends_the_reading_and_later_bytes_are_ignored() -> None:
    reader = StreamedReply()
    reader.feed(_stream(_events()) + b"data: {not json\n\n")
    assert reader.done and reader.kept() is not None


def test_no_chunk_no_reply() -> None:
    for data in (b"", b"data: {}\n\n", b": keep-alive\n\n", b"data: [1, 2]\n\n", b"data: {x\n\n"):
        assert _read(data, []).kept() is None


def test_an_event_over_the_bound_stops_the_reading() -> None:
    data = _stream(_events(ids=list(range(5000))))
    reader = _read(data, [100, 20_000], max_event_bytes=10_000)
    assert reader.overflowed and reader.kept() is None  # the check is then by count
    assert _read(data, [100, 20_000], max_event_bytes=64_000).kept() is not None


def test_a_long_answer_parses_only_the_chunks_that_can_add_something() -> None:
    """Chunks after the first are parsed only where they name usage or a fingerprint:
    ids on a later chunk are not vLLM's and are not read."""
    events = _events(ids=None)
    events[1]["prompt_token_ids"] = [1, 2, 3]
    kept = _read(_stream(events), []).kept()
    assert kept is not None and kept.ids is None


@pytest.mark.parametrize("piece", [1, 7, 4096])
def test_a_stream_without_done_is_read_at_close(piece: int) -> None:
    data = _stream(_events()).removesuffix(b"data: [DONE]\n\n").rstrip(b"\n")  # last event unended
    reader = StreamedReply()
    for start in range(0, len(data), piece):
        reader.feed(data[start : start + piece])
    assert not reader.done
    reader.close()
    kept = reader.kept()
    assert kept is not None and kept.prompt_tokens == len(IDS) and kept.ids is not None
