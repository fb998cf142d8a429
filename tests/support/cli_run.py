"""Run the real CLI (``main``) the way every hostile-input test expects it to end.

``run_cli(args, capsys)`` returns ``(exit code, stdout, stderr)`` after checking the two
things every hostile case promises: no traceback and no "this is a bug" line, and an exit
code 1 carries exactly one ``phaseaware: error:`` line (the typed error, said once).
"""

from __future__ import annotations

import pytest

from phaseaware.cli.main import main

__all__ = ["run_cli"]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``main(args)``'s exit code, stdout and stderr, checked as a hostile case's ending."""
    code = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "this is a bug" not in err, err
    if code == 1:
        assert err.count("phaseaware: error: ") == 1, err
    return code, out, err
