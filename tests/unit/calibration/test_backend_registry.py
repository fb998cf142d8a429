"""The calibration backend registry: every entry loads, names itself and owns its options."""

from __future__ import annotations

from dataclasses import fields

import pytest

from phaseaware.calibration.backends import factory
from phaseaware.calibration.backends.base import Backend
from phaseaware.errors import CalibrationError
from phaseaware.tokenizers import load_tokenizer

OPTION_FIELDS = {f.name for f in fields(factory.BackendOptions)} - {"kind"}


def test_built_in_backends_are_registered_in_order() -> None:
    assert factory.backend_names()[:3] == ("hf", "openai", "callable")


@pytest.mark.parametrize("name", factory.backend_names())
def test_every_entry_declares_real_options(name: str) -> None:
    entry = factory._BACKENDS[name]
    assert entry.name == name
    assert entry.options <= OPTION_FIELDS, entry.options - OPTION_FIELDS


def _answer(prompt_ids: object, **_: object) -> str:
    return "x"


def test_every_cheap_entry_builds() -> None:
    tok = load_tokenizer("tiktoken:cl100k_base")
    built = {
        "openai": factory.BackendOptions(
            kind="openai", base_url="http://127.0.0.1:9/v1", model="m", api_key="k"
        ),
        "callable": factory.BackendOptions(kind="callable", model=f"{__name__}:_answer"),
    }
    for name, options in built.items():
        backend = factory.make_backend(options, tok)
        assert isinstance(backend, Backend), name
        assert factory.run_names(options, tokenizer=None)[0] == options.model


def test_unknown_backend_names_the_registered_ones() -> None:
    with pytest.raises(CalibrationError, match="use one of hf, openai, callable"):
        factory.make_backend(factory.BackendOptions(kind="nope"), load_tokenizer("reference"))


def test_a_third_party_backend_registers_like_the_built_ins() -> None:
    calls: list[str] = []

    def build(options, tokenizer, info, default_model):  # type: ignore[no-untyped-def]
        calls.append(options.model or "")
        return factory._BACKENDS["callable"].build(
            factory.BackendOptions(kind="callable", model=f"{__name__}:_answer"),
            tokenizer, info, default_model,
        )  # fmt: skip

    entry = factory.BackendEntry(
        "third-party", build, lambda o, d: ("third", "reference"), frozenset({"model"})
    )
    factory.register_backend(entry)
    try:
        options = factory.BackendOptions(kind="third-party", model="x")
        assert factory.run_names(options, tokenizer=None) == ("third", "reference")
        factory.make_backend(options, load_tokenizer("reference"))
        assert calls == ["x"]
    finally:
        del factory._BACKENDS["third-party"]
