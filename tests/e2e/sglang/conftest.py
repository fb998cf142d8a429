"""The SGLang tier: SGLang 0.5.23's DeepSeek render path (deepseek-recipe driven by SGLang's
own glue files, :mod:`tests.support.sglang_glue`), no server and no GPU.

Skipped, with the reason, only when deepseek-recipe or the glue files are missing
(scripts/test.sh installs the one and runs scripts/fetch_sglang_glue.sh for the other).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.sglang_glue import glue_missing


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    why = glue_missing()
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.sglang)
            if why is not None:
                item.add_marker(pytest.mark.skip(reason=why))
