"""Eval-log readers, one module per harness; :data:`FORMATS` maps ``--format`` names to them.

Each reader is ``read(path, options) -> Iterator[EvalSample | Skip]``: it reads
the harness's own fields (cited in its docstring) and never locates tokens.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from phaseaware.scoring.formats import helmet, lm_eval, niah, opencompass, plain, ruler
from phaseaware.scoring.formats.common import ReadOptions
from phaseaware.scoring.sample import EvalSample, Skip

__all__ = ["FORMATS", "ReadOptions", "Reader"]

Reader = Callable[[Path, ReadOptions], Iterator[EvalSample | Skip]]

FORMATS: dict[str, Reader] = {
    "lm-eval": lm_eval.read,
    "ruler": ruler.read,
    "helmet": helmet.read,
    "niah": niah.read,
    "opencompass": opencompass.read,
    "jsonl": plain.read,
}
