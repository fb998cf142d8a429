"""``-V`` and ``--version`` print the version and exit 0."""

from __future__ import annotations

import pytest

from phaseaware.cli.main import main
from phaseaware.version import __version__


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version_flags(flag, capsys):
    with pytest.raises(SystemExit) as info:
        main([flag])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"phaseaware {__version__}"
