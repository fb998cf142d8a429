"""Token-exact completions: send the verified token ids, so no server template touches them.

Where an endpoint takes token ids (vLLM's and SGLang's ``/v1/completions`` accept
``prompt`` as a list of ints), :func:`complete_tokens` sends exactly the ids of
the assembled prompt, re-tokenized here and checked against the result's
fingerprint and token count, through the official ``openai`` client's
``completions.create``. The server then adds nothing before them (offset 0) and
``usage.prompt_tokens`` must equal the id count (checked after the call).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from phaseaware.assembly.report.result import AssemblyResult
from phaseaware.endpoints.usage import check_response
from phaseaware.errors import FingerprintMismatchError, VerificationError
from phaseaware.tokenizers import load_tokenizer
from phaseaware.tokenizers.base import Tokenizer

if TYPE_CHECKING:  # pragma: no cover
    import openai

__all__ = ["complete_tokens", "prompt_token_ids"]


def prompt_token_ids(result: AssemblyResult, tokenizer: Tokenizer | None = None) -> list[int]:
    """The ids of ``result.prompt`` (BOS included), confirmed against the result.

    Raises ``FingerprintMismatchError`` for another tokenizer and
    ``VerificationError`` when the count differs from ``result.token_count``.
    """
    tok = tokenizer if tokenizer is not None else load_tokenizer(result.tokenizer)
    if tok.fingerprint() != result.fingerprint:
        raise FingerprintMismatchError(
            f"the result was assembled with tokenizer {result.tokenizer!r} ({result.fingerprint}),"
            f" not {tok.spec!r} ({tok.fingerprint()}); pass the tokenizer it was assembled with"
        )
    ids = tok.encode(result.prompt)
    if len(ids) != result.token_count:
        raise VerificationError(
            f"re-tokenizing the prompt gave {len(ids)} tokens, the result says "
            f"{result.token_count}; assemble again with this tokenizer"
        )
    return ids


def complete_tokens(
    client: openai.OpenAI,
    *,
    model: str,
    result: AssemblyResult,
    tokenizer: Tokenizer | None = None,
    max_tokens: int = 64,
    on_mismatch: Literal["warn", "raise", "ignore"] = "raise",
    **create_kwargs: Any,
) -> Any:
    """``client.completions.create(model=, prompt=<the result's token ids>, ...)``.

    After the call, ``usage.prompt_tokens`` is checked against the id count with
    offset 0 (``on_mismatch``: raise ``PromptTokenDriftError``, warn or ignore).
    Returns the openai ``Completion``.
    """
    ids = prompt_token_ids(result, tokenizer)
    response = client.completions.create(
        model=model, prompt=ids, max_tokens=max_tokens, **create_kwargs
    )
    check_response(response, planned_tokens=len(ids), offset=0, on_mismatch=on_mismatch)
    return response
