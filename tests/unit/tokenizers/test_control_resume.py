"""A control-string count resumed from a remembered scan equals a scan from the start."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.tokenizers import control
from phaseaware.tokenizers.control import ControlScanner

STRINGS = ("<|im_start|>", "<|im_end|>", "<|a|>", "<|b|>", "<|a|><|b|>", "<｜User｜>", "||x")
PIECES = st.sampled_from([*STRINGS, "<|", "|>", "<", "|", "a", "x", " ", "\n", "｜", "b|>"])
TEXT = st.lists(PIECES, max_size=40).map("".join)


def _fresh(text: str) -> int:
    return ControlScanner(STRINGS).count(text)


@settings(max_examples=300, deadline=None)
@given(head=TEXT, steps=st.lists(TEXT, min_size=1, max_size=5), pad=st.integers(0, 12))
def test_resumed_count_equals_fresh(head: str, steps: list[str], pad: int) -> None:
    scanner = ControlScanner(STRINGS)
    old = control._SCAN_MEMO_MIN
    control._SCAN_MEMO_MIN = pad  # remember every text, even tiny ones
    try:
        text = head
        for step in steps:  # a growing conversation: each text starts with the last
            assert scanner.count(text) == _fresh(text)
            text += step
        assert scanner.count(text) == _fresh(text)
        assert scanner.count(head) == _fresh(head)  # a shorter text: no wrong resume
    finally:
        control._SCAN_MEMO_MIN = old


def test_long_growing_text_resumes() -> None:
    scanner = ControlScanner(STRINGS)
    text = ("<|im_start|>user\n" + "word " * 2000 + "<|im_end|>\n") * 3
    assert scanner.count(text) == _fresh(text) == 6
    longer = text + "<|a|><|b|>tail"
    assert scanner.count(longer) == _fresh(longer) == 7
    assert len(scanner._scans) == 2
