"""check_prompt_tokens: the server's usage.prompt_tokens against the plan plus the offset."""

from __future__ import annotations

import warnings

import pytest

from phaseaware.endpoints import check_prompt_tokens
from phaseaware.errors import InputError, PhaseawareWarning, PromptTokenDriftError


def test_exact_count_is_ok_and_silent() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check = check_prompt_tokens(planned_tokens=100, reported_tokens=101, offset=1)
    assert check.ok and check.drift == 0 and check.observed_offset == 1


def test_drift_warns_with_the_new_offset() -> None:
    with pytest.warns(PhaseawareWarning, match=r"drift \+3.*position_offset=3"):
        check = check_prompt_tokens(planned_tokens=100, reported_tokens=103)
    assert not check.ok and check.expected_tokens == 100 and check.observed_offset == 3


def test_drift_raises_by_option() -> None:
    with pytest.raises(PromptTokenDriftError, match="another chat format"):
        check_prompt_tokens(planned_tokens=100, reported_tokens=98, offset=1, on_mismatch="raise")


def test_ignore_returns_the_check() -> None:
    check = check_prompt_tokens(planned_tokens=10, reported_tokens=12, on_mismatch="ignore")
    assert check.drift == 2


@pytest.mark.parametrize(
    "kwargs",
    [
        {"planned_tokens": -1, "reported_tokens": 1},
        {"planned_tokens": 1, "reported_tokens": True},
        {"planned_tokens": 1, "reported_tokens": 1, "offset": "1"},
        {"planned_tokens": 1, "reported_tokens": 1, "on_mismatch": "loud"},
    ],
)
def test_bad_arguments_are_typed_errors(kwargs: dict[str, object]) -> None:
    with pytest.raises(InputError):
        check_prompt_tokens(**kwargs)  # type: ignore[arg-type]


def test_a_varying_endpoint_accepts_any_offset_of_its_set() -> None:
    from phaseaware.endpoints import check_response

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check = check_prompt_tokens(planned_tokens=100, reported_tokens=103, offsets=[1, 2, 3])
    assert check.ok and check.observed_offset == 3
    with pytest.raises(
        PromptTokenDriftError, match=r"offset one of \[1, 2, 3\].*position_offset=5"
    ):
        check_prompt_tokens(
            planned_tokens=100, reported_tokens=105, offsets=[1, 2, 3], on_mismatch="raise"
        )
    assert check_response({"usage": {"prompt_tokens": 101}}, planned_tokens=100, offset=1).ok  # type: ignore[union-attr]
    assert check_response({"choices": []}, planned_tokens=100) is None
