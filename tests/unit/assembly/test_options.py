"""AssemblyOptions and the one position-offset validator."""

from __future__ import annotations

import pytest

from phaseaware.assembly import AssemblyOptions, check_position_offset
from phaseaware.errors import InputError


def test_check_position_offset() -> None:
    assert check_position_offset(0, name="x") == 0
    assert check_position_offset(2, name="x") == 2
    for bad in (-1, 1.0, True, "1", None):
        with pytest.raises(InputError, match=r"^--prompt-token-offset must be"):
            check_position_offset(bad, name="--prompt-token-offset")
    with pytest.raises(InputError, match="1 for a BOS"):
        check_position_offset(-1, name="x")


def test_options_use_the_validator() -> None:
    with pytest.raises(InputError, match=r"^options.position_offset must be >= 0"):
        AssemblyOptions(position_offset=-1)
    with pytest.raises(InputError, match=r"^options.position_offset must be an integer"):
        AssemblyOptions(position_offset=1.5)  # type: ignore[arg-type]
    assert AssemblyOptions(position_offset=1).position_offset == 1
