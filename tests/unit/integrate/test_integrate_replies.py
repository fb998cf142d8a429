"""phaseaware.integrate.ReplyStore: reply bodies' prompt ids by response id, taken once,
never handed to another reply, bounded; and ``UsagePlans.end(raw=...)`` comparing them."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from phaseaware.caches import list_caches
from phaseaware.errors import PromptTokenDriftError
from phaseaware.integrate import ReplyStore, UsagePlans, rendered_ids, target_of

MESSAGES = [{"role": "user", "content": "Below which voltage is a Helios-3 module disabled?"}]


def _body(reply_id: str | None, ids: list[int] | None, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"choices": [{"index": 0}], "model": "m", **extra}
    if reply_id is not None:
        body["id"] = reply_id
    if ids is not None:
        body["prompt_token_ids"] = ids
        body.setdefault("usage", {"prompt_tokens": len(ids)})
    return body


def test_a_body_is_taken_once_by_its_id_and_count() -> None:
    store = ReplyStore()
    assert store.keep(_body("r1", [5, 6, 7]))
    assert store.take("r2", prompt_tokens=3) is None  # another reply
    assert store.take("r1", prompt_tokens=4) is None  # the reply's own count differs
    assert store.keep(_body("r1", [5, 6, 7]))
    assert store.take("r1", prompt_tokens=3) == {
        "id": "r1", "model": "m", "usage": {"prompt_tokens": 3}, "prompt_token_ids": [5, 6, 7]
    }  # fmt: skip
    assert store.take("r1", prompt_tokens=3) is None and len(store) == 0  # taken once
    assert not store.keep(_body(None, [1]))  # no id: nothing could find it
    assert store.take(None, prompt_tokens=1) is None


def test_sglangs_ids_on_the_first_choice_are_kept() -> None:
    store = ReplyStore()
    body = {"id": "s1", "choices": [{"index": 0, "prompt_token_ids": [9, 8]}],
            "usage": {"prompt_tokens": 2}}  # fmt: skip
    store.keep(body)
    assert store.take("s1", prompt_tokens=2) == {
        "id": "s1", "usage": {"prompt_tokens": 2}, "prompt_token_ids": [9, 8]
    }  # fmt: skip


def test_an_id_kept_twice_is_handed_to_nobody_until_every_copy_was_taken() -> None:
    store = ReplyStore()
    store.keep(_body("x", [1, 2]))
    store.keep(_body("x", None, usage={"prompt_tokens": 2}))  # a body without ids counts too
    assert store.take("x", prompt_tokens=2) is None  # ambiguous
    store.keep(_body("x", [3, 4]))  # a third copy while one still waits
    assert store.take("x", prompt_tokens=2) is None
    assert store.take("x", prompt_tokens=2) is None
    assert len(store) == 0
    store.keep(_body("x", [3, 4]))  # every copy taken: the id is fresh again
    assert store.take("x", prompt_tokens=2)["prompt_token_ids"] == [3, 4]  # type: ignore[index]


def test_the_store_is_bounded_in_entries_and_bytes() -> None:
    store = ReplyStore(max_entries=2, name="test.replies")
    for k in range(3):
        store.keep(_body(f"r{k}", [k]))
    assert len(store) == 2 and store.take("r0", prompt_tokens=1) is None  # evicted
    assert store.take("r2", prompt_tokens=1) is not None
    assert any(c.name == "test.replies" and "2 entries" in c.bound for c in list_caches())
    small = ReplyStore(max_bytes=4096)
    small.keep(_body("big", list(range(5000))))  # 20 kB of ids: never kept
    assert len(small) == 0 and small.take("big", prompt_tokens=5000) is None
    small.clear()


def test_threads_each_take_their_own() -> None:
    store = ReplyStore()
    got: dict[int, Any] = {}

    def one(k: int) -> None:
        store.keep(_body(f"t{k}", [k] * (k + 1)))
        got[k] = store.take(f"t{k}", prompt_tokens=k + 1)

    threads = [threading.Thread(target=one, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(got[k]["prompt_token_ids"] == [k] * (k + 1) for k in range(16))


def test_usage_plans_compare_the_ids_of_a_raw_body(o200k: Any) -> None:
    target = target_of({"tokenizer": o200k, "chat_format": "chatml", "profile": None})
    seen: list[Any] = []
    plans = UsagePlans(target, on_mismatch="raise", on_check=seen.append)
    ids = rendered_ids(target, MESSAGES)
    plans.start("a", MESSAGES)
    check = plans.end("a", reported_tokens=len(ids), raw=_body("r", list(ids)))
    assert check is not None and check.ids_compared and check.first_difference is None
    assert seen == [check]
    swapped = [*ids[:-1], ids[-1] + 1]  # the last token another: the same count
    plans.start("b", MESSAGES)
    with pytest.raises(PromptTokenDriftError, match=f"at planned token {len(ids) - 1} "):
        plans.end("b", reported_tokens=len(ids), raw=_body("r", swapped))
    plans.start("c", MESSAGES)  # no body: the count, as before
    assert not plans.end("c", reported_tokens=len(ids)).ids_compared  # type: ignore[union-attr]
