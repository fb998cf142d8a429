"""ChunkTokenCache: LRU under a byte cap (threads included); caching never changes a result."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from phaseaware.assembly import AssemblyOptions, Chunk, assemble
from phaseaware.assembly.prepare.measured_request import MAX_PERIOD
from phaseaware.assembly.retokenize.cache import CacheEntry
from phaseaware.assembly.retokenize.windowed import ChunkTokenCache, default_cache
from phaseaware.errors import InputError
from phaseaware.profiles.registry import get_profile


def _entry(n: int) -> CacheEntry:
    return CacheEntry(0, n, np.arange(n, dtype=np.int64))


def test_cache_stays_under_its_cap_and_evicts_least_recent():
    cache = ChunkTokenCache(max_bytes=20_000)
    for i in range(200):
        cache.put(("fp", f"chunk {i}"), _entry(100))
        assert cache.nbytes <= cache.max_bytes
        if i == 5:
            assert cache.get(("fp", "chunk 0")) is not None  # touched: most recent now
    assert cache.get(("fp", "chunk 199")) is not None
    assert cache.get(("fp", "chunk 1")) is None  # evicted
    assert 0 < len(cache) < 200


def test_entry_larger_than_cap_is_not_stored_and_zero_cap_stores_nothing():
    assert len(_put_one(ChunkTokenCache(max_bytes=100), 1000)) == 0
    assert len(_put_one(ChunkTokenCache(max_bytes=0), 1)) == 0
    with pytest.raises(ValueError, match="max_bytes"):
        ChunkTokenCache(max_bytes=-1)


def _put_one(cache: ChunkTokenCache, n: int) -> ChunkTokenCache:
    cache.put(("fp", "x"), _entry(n))
    return cache


def test_cache_is_thread_safe_under_its_cap():
    cache = ChunkTokenCache(max_bytes=50_000)

    def work(t: int) -> None:
        for i in range(300):
            cache.put(("fp", f"{t}-{i}"), _entry(i % 50 + 1))
            cache.get(("fp", f"{t}-{i // 2}"))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert cache.nbytes <= cache.max_bytes
    assert cache.nbytes == sum(size for _, size in cache._entries.values())


def test_default_cache_is_bounded():
    assert default_cache().max_bytes == 64 * 1024 * 1024


def _chunks() -> list[Chunk]:
    words = "alpha vault code beta Tamarind archive gamma opens delta".split()
    return [
        Chunk(
            text=" ".join(words[(i + j) % len(words)] for j in range(40)) + f" fact {i}.",
            score=(i * 37 % 11) / 11,
            id=f"c{i}",
        )
        for i in range(12)
    ] + [Chunk(text="  leading spaces, (odd) start 12345", score=0.5, id="odd")]


@pytest.mark.parametrize("spec", ["cl100k", "o200k", "deepseek_v4"])
def test_assembly_identical_cold_warm_and_without_cache(spec, request):
    tok = request.getfixturevalue(spec)
    layout = "chatml" if spec != "deepseek_v4" else "deepseek-v4"
    kwargs = dict(
        tokenizer=tok, chat_format=layout, question="Which vault code opens the Tamarind archive?",
        profile=get_profile("deepseek-v4-flash-base"), budget_tokens=900,
        options=AssemblyOptions(allow_tokenizer_mismatch=True),
    )  # fmt: skip
    cache = ChunkTokenCache()
    plain = assemble(_chunks(), cache=None, **kwargs)
    cold = assemble(_chunks(), cache=cache, **kwargs)
    warm = assemble(_chunks(), cache=cache, **kwargs)
    assert plain.to_dict() == cold.to_dict() == warm.to_dict()
    assert plain.prompt == cold.prompt == warm.prompt
    assert plain.verification == "full"
    expected = "windowed"  # tiktoken cl100k/o200k and DeepSeek-V4 (tokenizers.windowing)
    assert cold.verification == warm.verification == expected
    assert "verification" not in warm.to_dict()
    assert len(tok.encode(warm.prompt)) == warm.token_count


def test_period_above_the_bound_is_a_clear_error(cl100k):
    import dataclasses

    base = get_profile("deepseek-v4-flash-base")
    p = MAX_PERIOD + 1
    big = dataclasses.replace(
        base, period=p, residue_accuracy=(0.5,) * p, n=(1,) * p, ci_low=(0.4,) * p,
        ci_high=(0.6,) * p, reliability=None,
    )  # fmt: skip
    with pytest.raises(InputError, match=f"periods up to {MAX_PERIOD}"):
        assemble(
            ["some text here"], tokenizer=cl100k, chat_format="chatml",
            question="q?", profile=big, budget_tokens=500,
            options=AssemblyOptions(allow_tokenizer_mismatch=True),
        )  # fmt: skip


def test_warm_call_reuses_the_sets_evidence_and_junctions_and_clear_empties_them(deepseek_v4):
    """The same chunks again: the set's default evidence and verification's junction
    encodes come from the cache (the result is equal); a fresh or cleared cache is cold."""
    kwargs = dict(
        tokenizer=deepseek_v4, chat_format="none", budget_tokens=900,
        question="Which vault code opens the Tamarind archive?",
        profile=get_profile("deepseek-v4-flash-base"),
    )  # fmt: skip
    cache = ChunkTokenCache()
    cold = assemble(_chunks(), cache=cache, **kwargs)
    assert len(cache.key_sets) == 1 and len(cache.joins) >= 1
    sets, joins = (cache.key_sets.hits, cache.joins.hits)
    warm = assemble(_chunks(), cache=cache, **kwargs)
    assert warm.to_dict() == cold.to_dict() == assemble(_chunks(), cache=None, **kwargs).to_dict()
    assert cache.key_sets.hits == sets + 1 and cache.joins.hits > joins
    for key in cache.joins.snapshot_keys():  # handed out read-only: no caller can alter them
        stored = cache.joins.get(key)
        assert stored is not None and not stored.flags.writeable
    other = assemble(_chunks()[:5], cache=cache, **kwargs)  # another set: its own keys
    assert other.to_dict() == assemble(_chunks()[:5], cache=None, **kwargs).to_dict()
    assert len(cache.key_sets) == 2
    cache.clear()
    assert len(cache) == len(cache.key_sets) == len(cache.joins) == 0
