"""Calibration through batch files: emit the pending probes, ingest the results.

:func:`emit_pending` writes the probes that the run's log does not hold yet (all
of them for a new run) as an OpenAI batch input file. :func:`ingest_results`
reads the batch output (lines in any order), logs every usable completion through
the runner (a :class:`~phaseaware.calibration.backends.batch.ReplayBackend`) and
builds the profile. Nothing vanishes silently: every unusable line (bad JSON,
HTTP error, prompt-token mismatch, unknown id) and every pending probe with no
line is listed in the returned :class:`IngestReport`, the usable ones are still
logged, and ``failure`` says the fix: emit a batch again (it holds just the
pending probes), run it, ingest its output.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from phaseaware.calibration.backends.base import ProbeRequest
from phaseaware.calibration.backends.batch import (
    BATCH_BACKEND,
    ReplayBackend,
    emit_batch,
    read_batch_results,
)
from phaseaware.calibration.log import logged_probe_ids
from phaseaware.calibration.probes import iter_groups
from phaseaware.calibration.runner import CalibrationResult, CalibrationRun
from phaseaware.endpoints.request_settings import chat_template_kwargs
from phaseaware.errors import CalibrationError

__all__ = ["EmitReport", "IngestReport", "pending_requests", "emit_pending", "ingest_results"]


@dataclass(frozen=True)
class EmitReport:
    """``written``: requests in the batch file; ``already_logged``: probes the log holds."""

    path: str
    written: int
    already_logged: int


@dataclass(frozen=True)
class IngestReport:
    """The outcome of ingesting a batch results file.

    ``result``: the calibration (``None`` when problems left too little to analyse);
    ``problems``: one line per unusable result line or missing result; ``failure``:
    the error to report when there are problems (what is logged, what is pending,
    how to finish), else ``None``.
    """

    result: CalibrationResult | None
    problems: tuple[str, ...]
    failure: str | None


def pending_requests(run: CalibrationRun) -> tuple[list[ProbeRequest], set[str]]:
    """(every request of ``run``, ids already in its log). Raises ``LogError`` for a
    log of another run (unless ``run.fresh``)."""
    header = run.header(backend=BATCH_BACKEND)
    done = logged_probe_ids(run.log_path, header, fresh=run.fresh)
    settings = run.settings
    groups = iter_groups(tokenizer=run.tokenizer, layout=run.layout, settings=settings)
    requests = [p.request(max_tokens=settings.max_tokens) for g in groups for p in g.probes]
    return requests, done


def emit_pending(
    run: CalibrationRun, path: str | os.PathLike[str], *, model: str, endpoint: str
) -> EmitReport:
    """Write the probes of ``run`` its log lacks to the batch file ``path`` (``model``:
    the name the batch server serves)."""
    requests, done = pending_requests(run)
    pending = [r for r in requests if r.probe_id not in done]
    kwargs = chat_template_kwargs(
        chat_format=run.chat_format, thinking=bool(getattr(run.layout, "thinking", False))
    )
    count = emit_batch(pending, path, model=model, endpoint=endpoint, chat_template_kwargs=kwargs)
    return EmitReport(path=str(path), written=count, already_logged=len(done))


def ingest_results(
    run: CalibrationRun,
    path: str | os.PathLike[str],
    *,
    out_path: str | os.PathLike[str],
    check_prompt_tokens: bool = True,
) -> IngestReport:
    """Log the usable results in ``path`` and build the profile (saved to ``out_path``
    only when every pending probe has a usable result)."""
    requests, done = pending_requests(run)
    pending = {r.probe_id for r in requests} - done
    results = read_batch_results(
        path,
        requests=requests,
        prompt_token_offset=run.position_offset,
        check_prompt_tokens=check_prompt_tokens,
    )
    missing = [pid for pid in results.missing if pid in pending]
    problems = tuple(
        [
            f"batch line {e.line} ({e.custom_id or 'no custom_id'}): {e.message}"
            for e in results.errors
        ]
        + [f"probe {pid} has no result line in {path}" for pid in missing]
    )
    usable = {k: v for k, v in results.completions.items() if k in pending}
    result: CalibrationResult | None
    try:
        result = run.run(
            ReplayBackend(usable), out_path=None if problems else out_path, allow_missing=True
        )
    except CalibrationError:
        if not problems:
            raise
        result = None
    if not problems:
        return IngestReport(result=result, problems=(), failure=None)
    left = len(pending) - len(usable)
    failure = (
        f"{len(results.errors)} bad line(s) and {len(missing)} missing result(s) in "
        f"{path} (listed above); the {len(usable)} usable results are logged in "
        f"{run.log_path}, {left} probe(s) are pending: run the same command with "
        "--emit-batch FILE (it writes only the pending probes), run that batch, then "
        "--ingest its output"
    )
    return IngestReport(result=result, problems=problems, failure=failure)
