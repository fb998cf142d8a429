"""Hooks for every test folder (``tests/`` and ``integrations/*/tests``).

A test skipped because a module is missing names the command that installs it: pytest's
own ``importorskip`` says only ``could not import 'torch'``, so the skip reason gets the
command from :func:`phaseaware.extras.install_command` (THE install hints, the same
the command line and the examples print).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from phaseaware.extras import install_command

_COULD_NOT_IMPORT = re.compile(r"could not import '([\w.]+)'")


def skip_reason_with_install(reason: str) -> str:
    """``reason`` plus the install command when it is pytest's ``could not import 'M'``."""
    found = _COULD_NOT_IMPORT.search(reason)
    if found is None or "pip install" in reason:
        return reason
    return f"{reason}; install it: {install_command(found.group(1))}"


def _teach(report: Any) -> None:
    longrepr = getattr(report, "longrepr", None)
    if report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3:
        path, lineno, reason = longrepr
        report.longrepr = (path, lineno, skip_reason_with_install(str(reason)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    _teach(outcome.get_result())  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _teach(outcome.get_result())  # type: ignore[attr-defined]
