"""One list of process-wide caches: each states its bound, sizes itself and clears."""

from __future__ import annotations

import phaseaware
from phaseaware.caches import list_caches, register_cache


def _assemble() -> phaseaware.AssemblyResult:
    return phaseaware.assemble(
        ["Alpha holds 17 boxes.", "Beta holds 23 boxes."],
        tokenizer="tiktoken:cl100k_base",
        question="How many boxes does Beta hold?",
        budget_tokens=200,
    )


def test_built_in_caches_are_listed_with_their_bounds() -> None:
    import phaseaware.assembly.conversation  # noqa: F401  (agent loops: the sent-prompt cache)

    _assemble()
    names = {c.name: c for c in list_caches()}
    for name in (
        "assembly.chunk_tokens",
        "assembly.filler",
        "assembly.pad_searches",
        "assembly.prefix_cut_encodes",
        "assembly.sent_prompts",
        "assembly.single_turn_layouts",
        "assembly.windowed_capabilities",
        "profiles.loaded",
        "tokenizers.capabilities",
        "tokenizers.control_scanners",
        "tokenizers.loaded",
        "tokenizers.short_encodes",
    ):
        assert name in names, sorted(names)
        assert names[name].bound
    assert names["tokenizers.loaded"].entries >= 1
    assert names["assembly.chunk_tokens"].nbytes is not None


def test_clearing_every_cache_never_changes_a_result() -> None:
    before = _assemble()
    phaseaware.clear_caches()
    assert all(c.entries == 0 for c in list_caches())
    after = _assemble()
    assert after.prompt == before.prompt
    assert after.to_dict() == before.to_dict()


def test_a_cache_without_a_bound_is_refused() -> None:
    try:
        register_cache("test.unbounded", size=lambda: (0, None), clear=lambda: None, bound="")
    except ValueError as exc:
        assert "bound" in str(exc)
    else:  # pragma: no cover
        raise AssertionError("an unbounded cache was accepted")


def test_bounded_cache_evicts_least_recently_used_and_is_listed() -> None:
    from phaseaware.caches import BoundedCache

    cache: BoundedCache[str, int] = BoundedCache(max_entries=2, name="test.bounded")
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1  # "b" is now the least recently used
    cache.put("c", 3)
    assert not cache.peek("b") and cache.get("c") == 3 and len(cache) == 2
    listed = {c.name: c for c in list_caches()}["test.bounded"]
    assert listed.entries == 2 and listed.bound == "LRU, 2 entries"
    phaseaware.clear_caches()
    assert len(cache) == 0 and cache.get("a") is None


def test_bounded_cache_byte_bound_keeps_the_sum_below_it() -> None:
    from phaseaware.caches import BoundedCache

    cache: BoundedCache[int, bytes] = BoundedCache(max_bytes=10, size_of=lambda k, v: len(v))
    cache.put(1, b"x" * 11)  # larger than the bound alone: not kept
    assert len(cache) == 0
    for key in range(5):
        cache.put(key, b"abcd")
    assert cache.nbytes <= 10 and cache.snapshot_keys() == [3, 4]
    assert cache.pop(3) == b"abcd" and cache.pop(3) is None  # removed, its bytes freed
    assert cache.nbytes == 4 and cache.snapshot_keys() == [4]
    for bad in ({"max_entries": -1}, {}, {"max_bytes": 5}):
        try:
            BoundedCache(**bad)  # type: ignore[arg-type]
        except ValueError:
            pass
        else:  # pragma: no cover
            raise AssertionError(f"accepted {bad}")
