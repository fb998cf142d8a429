"""serialize.to_plain / dataclass_to_dict: the one dataclass -> JSON-ready shape."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from phaseaware.serialize import dataclass_to_dict, to_plain


@dataclass(frozen=True)
class _Inner:
    values: tuple[int, ...]
    note: str | None = None


@dataclass(frozen=True)
class _Outer:
    name: str
    inner: _Inner
    rows: tuple[_Inner, ...] = ()
    meta: dict[str, object] = field(default_factory=dict)


def test_to_plain_recurses_in_field_order() -> None:
    value = _Outer("x", _Inner((1, 2)), rows=(_Inner((3,), "n"),), meta={"b": (1,), "a": None})
    plain = to_plain(value)
    assert plain == {
        "name": "x",
        "inner": {"values": [1, 2], "note": None},
        "rows": [{"values": [3], "note": "n"}],
        "meta": {"b": [1], "a": None},
    }
    assert list(plain) == ["name", "inner", "rows", "meta"]
    assert list(plain["meta"]) == ["b", "a"]  # mapping order kept, not sorted
    json.dumps(plain)  # JSON-ready


def test_scalars_pass_through() -> None:
    assert [to_plain(v) for v in (1, 1.5, "s", None, True)] == [1, 1.5, "s", None, True]


def test_dataclass_to_dict_omits_unset_optional_fields() -> None:
    assert dataclass_to_dict(_Inner((1,)), omit_if_none=("note",)) == {"values": [1]}
    assert dataclass_to_dict(_Inner((1,), "n"), omit_if_none=("note",)) == {
        "values": [1],
        "note": "n",
    }
    with pytest.raises(TypeError, match="dataclass instance"):
        dataclass_to_dict(_Inner)


@dataclass(frozen=True)
class _B_Inner:
    b: int
    a: tuple[int, ...]


@dataclass(frozen=True)
class _B_Outer:
    z: str
    inner: _B_Inner
    items: tuple[_B_Inner, ...]
    messages: tuple[dict[str, str], ...] | None
    derived: int = field(init=False, default=3)


def test_to_plain_keeps_field_order_lists_and_derived_fields() -> None:
    value = _B_Outer(
        "x", _B_Inner(1, (2, 3)), (_B_Inner(4, ()),), ({"role": "user", "content": "c"},)
    )
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
    assert to_plain(_B_Inner) is _B_Inner  # a class is not an instance
    assert to_plain(None) is None and to_plain(1.5) == 1.5
