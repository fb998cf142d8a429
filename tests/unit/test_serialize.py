"""to_plain: the one dataclass -> JSON-ready conversion (field order, lists for tuples)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from phaseaware.serialize import to_plain


@dataclass(frozen=True)
class Inner:
    b: int
    a: tuple[int, ...]


@dataclass(frozen=True)
class Outer:
    z: str
    inner: Inner
    items: tuple[Inner, ...]
    messages: tuple[dict[str, str], ...] | None
    derived: int = field(init=False, default=3)


def test_to_plain_keeps_field_order_and_lists() -> None:
    value = Outer("x", Inner(1, (2, 3)), (Inner(4, ()),), ({"role": "user", "content": "c"},))
    plain = to_plain(value)
    assert plain == {
        "z": "x",
        "inner": {"b": 1, "a": [2, 3]},
        "items": [{"b": 4, "a": []}],
        "messages": [{"role": "user", "content": "c"}],
        "derived": 3,
    }
    assert list(plain) == ["z", "inner", "items", "messages", "derived"]
    assert list(plain["inner"]) == ["b", "a"]
    assert json.loads(json.dumps(plain)) == plain
    assert to_plain(Inner) is Inner  # a class is not an instance
    assert to_plain(None) is None and to_plain(1.5) == 1.5
