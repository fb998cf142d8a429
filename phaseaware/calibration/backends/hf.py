"""A local transformers model as a calibration backend (greedy answers + answer log-likelihood).

``load_hf_backend(model)`` resolves ``model``: ``hf:<path>`` or a folder / cached
hub name → ``AutoModelForCausalLM`` (local files only); a ``.gguf`` file → loaded
with ``gguf_file=`` (dequantized to fp32); an :class:`HFModelSource` → its own
loader (the reference package provides one for the shipped reference model, so
this module never imports the reference package). Prompts are encoded with the run's phaseaware tokenizer, so the model
sees exactly the ids whose positions the probes verified.

Prefix reuse: the variants of one base prompt share every token before the
target record. With a model that returns a KV cache (``DynamicCache``), that
shared prefix is computed once; each batch of variants gets a deep copy of the
prefix cache (repeated to the batch size) and only its own suffix is computed.
Variants of equal length (the key sweep) are batched; identical prompts (key
offset 0 = length offset 0) are computed once.

Answer draft (exact speculative decoding): the expected answer is fed after the
prompt in the same pass that scores its log-likelihood. Greedy tokens are read
off that pass for as long as they agree with the answer, plus the next one;
they are exactly what step-by-step greedy decoding would produce, so a reply
that completes within them ("104 .") needs no decode step, and any other reply
continues decoding from where it diverged. Judging is unchanged: the greedy
text's first number must equal the answer. Models that return no cache
(the reference model: compressed attention is recomputed from position 0) fall
back to full recompute, still batched; ``model_info["kv_cache"]`` says which.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from phaseaware.calibration.backends.base import Completion, ProbeRequest
from phaseaware.errors import BackendError, CalibrationError
from phaseaware.tokenizers.base import Tokenizer

__all__ = [
    "HFBackend",
    "HFModelSource",
    "load_hf_backend",
    "resolve_model",
    "default_tokenizer_spec",
    "model_display_name",
]

_DONE = re.compile(r"\d+\D")


def _torch() -> Any:
    import torch

    return torch


def _forward(
    model: Any, ids: Any, cache: Any = None, *, use_cache: bool = True, keep: int = 0
) -> tuple[Any, Any]:
    """``(logits, cache)`` across transformers versions (``cache=`` vs ``past_key_values=``).

    ``keep > 0``: only the last ``keep`` positions' logits are wanted. A model whose
    forward takes ``logits_to_keep`` (``num_logits_to_keep`` before transformers 4.50)
    runs only those hidden states through its LM head (about a fifth of a pass on
    SmolLM2-135M); other models' logits are sliced. The hidden states are those of the
    full pass; ``tests/unit/calibration/test_backend_hf.py`` checks answers equal plain greedy.
    """
    params = inspect.signature(model.forward).parameters
    kwargs: dict[str, Any] = {}
    if keep > 0:
        name = next((k for k in ("logits_to_keep", "num_logits_to_keep") if k in params), None)
        if name is not None:
            kwargs[name] = keep
    if not use_cache:
        logits = model(ids, **kwargs).logits
        return (logits[:, -keep:] if keep > 0 else logits), None
    if cache is not None:
        kwargs["cache" if "cache" in params else "past_key_values"] = cache
    out = model(ids, use_cache=True, **kwargs)
    # transformers 5 names it `cache` (reading `past_key_values` then logs a deprecation
    # notice on every run, even when the model keeps no cache); older versions lack `cache`
    new_cache = out.cache if hasattr(out, "cache") else getattr(out, "past_key_values", None)
    return (out.logits[:, -keep:] if keep > 0 else out.logits), new_cache


def _crop(cache: Any, keep: int) -> None:
    """Cut ``cache`` back to its first ``keep`` positions (both crop conventions)."""
    params = list(inspect.signature(cache.crop).parameters)
    if params and params[0] == "max_length":
        cache.crop(keep)
        return
    remove = cache.get_seq_length() - keep
    if remove > 0:
        cache.crop(-remove)


class HFBackend:
    """Runs probe groups through ``model`` (a transformers causal LM, eval mode)."""

    def __init__(
        self,
        model: Any,
        tokenizer: Tokenizer,
        *,
        name: str,
        reuse_prefix: bool = True,
        batch: bool = True,
        max_batch: int = 16,
        threads: int | None = 1,
        model_info: Mapping[str, Any] | None = None,
    ) -> None:
        """``model_info``: facts the caller knows better than the model's config (e.g.
        ``{"local_window": 64}``); they override the config-derived entries."""
        torch = _torch()
        if threads:
            torch.set_num_threads(threads)
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        self.reuse_prefix = reuse_prefix
        self.max_batch = max_batch if batch else 1
        config = model.config
        eos = getattr(config, "eos_token_id", None)
        self.eos_ids = set(eos if isinstance(eos, list) else [] if eos is None else [eos])
        self.max_positions = getattr(config, "max_position_embeddings", None)
        self.kv_cache = self._supports_cache()
        self.model_info: dict[str, Any] = {
            "max_position_embeddings": self.max_positions,
            "kv_cache": self.kv_cache,
            "local_window": getattr(config, "local_window", None),
            "compression_stride": getattr(config, "compress_stride", None),
            **(model_info or {}),
        }

    def _supports_cache(self) -> bool:
        torch = _torch()
        with torch.no_grad():
            _, cache = _forward(self.model, torch.tensor([[0, 0]]))
        return cache is not None

    # ------------------------------------------------------------------ public

    def complete(self, group: Sequence[ProbeRequest]) -> Iterator[Completion]:
        torch = _torch()
        sequences: dict[tuple[int, ...], list[ProbeRequest]] = {}
        for request in group:
            ids = tuple(self.tokenizer.encode(request.prompt))
            if len(ids) != request.prompt_tokens:
                raise BackendError(
                    f"probe {request.probe_id}: the model's tokenizer gives {len(ids)} tokens, the "
                    f"probe expects {request.prompt_tokens}; pass the model's tokenizer (--tokenizer)"
                )
            self._check_window(len(ids) + request.max_tokens)
            sequences.setdefault(ids, []).append(request)
        unique = list(sequences)
        answers = {
            ids: tuple(self.tokenizer.encode(reqs[0].answer)) for ids, reqs in sequences.items()
        }
        max_new = max(r.max_tokens for r in group)
        with torch.no_grad():
            for ids_batch, texts, logprobs in self._run(unique, answers, max_new):
                for ids, text, logprob in zip(ids_batch, texts, logprobs, strict=True):
                    for request in sequences[ids]:
                        yield Completion(request.probe_id, text, logprob)

    def close(self) -> None:
        self.model = None

    # ------------------------------------------------------------------ internals

    def _check_window(self, needed: int) -> None:
        if self.max_positions is not None and needed > self.max_positions:
            raise CalibrationError(
                f"prompts need {needed} positions (prompt + answer) but model {self.name!r} has a "
                f"window of {self.max_positions} tokens; lower --context-tokens"
            )

    def _batches(self, unique: list[tuple[int, ...]]) -> list[list[tuple[int, ...]]]:
        by_length: dict[int, list[tuple[int, ...]]] = {}
        for ids in unique:
            by_length.setdefault(len(ids), []).append(ids)
        out = []
        for same in by_length.values():
            out += [same[i : i + self.max_batch] for i in range(0, len(same), self.max_batch)]
        return out

    def _run(
        self,
        unique: list[tuple[int, ...]],
        answers: dict[tuple[int, ...], tuple[int, ...]],
        max_new: int,
    ) -> Iterator[tuple[list[tuple[int, ...]], list[str], list[float | None]]]:
        prefix_len, prefix_cache = 0, None
        if self.kv_cache and self.reuse_prefix and len(unique) > 1:
            prefix_len = _common_prefix(unique)
            prefix_len = min(prefix_len, min(len(ids) for ids in unique) - 1)
            if prefix_len > 0:
                torch = _torch()
                _, prefix_cache = _forward(
                    self.model, torch.tensor([unique[0][:prefix_len]]), keep=1
                )
        for batch in self._batches(unique):
            texts, logprobs = self._complete_batch(
                batch, answers, prefix_len, prefix_cache, max_new
            )
            yield batch, texts, logprobs

    def _complete_batch(
        self,
        batch: list[tuple[int, ...]],
        answers: dict[tuple[int, ...], tuple[int, ...]],
        prefix_len: int,
        prefix_cache: Any,
        max_new: int,
    ) -> tuple[list[str], list[float | None]]:
        torch = _torch()
        answer_ids = [answers[ids] for ids in batch]
        same_answer_len = len({len(a) for a in answer_ids}) == 1 and len(answer_ids[0]) > 0
        # Teacher-force each row's answer after its prompt: one pass yields the answer's
        # log-likelihood and, read as a speculative draft, the exact greedy tokens as far
        # as the model agrees with the answer (plus the one after), often the whole reply.
        # A batch's drafts need one length; a base prompt's variants share their answer.
        drafts: list[tuple[int, ...]] = answer_ids if same_answer_len else [() for _ in batch]
        n_draft = len(drafts[0])
        rows = [list(ids[prefix_len:]) + list(d) for ids, d in zip(batch, drafts, strict=True)]
        inputs = torch.tensor(rows)
        cache = None
        if self.kv_cache and prefix_cache is not None:
            cache = copy.deepcopy(prefix_cache)
            if len(batch) > 1:
                cache.batch_repeat_interleave(len(batch))
        # Only the last n_draft + 1 positions (the prompt's last token and the draft's) are
        # read: the answer's log-likelihood and the greedy tokens.
        raw, cache = _forward(self.model, inputs, cache, use_cache=self.kv_cache, keep=n_draft + 1)
        logits = raw.float().log_softmax(-1)
        logprobs: list[float | None] = [None] * len(batch)
        if same_answer_len:
            for i, a in enumerate(answer_ids):
                steps = logits[i, : len(a)]
                logprobs[i] = float(steps[torch.arange(len(a)), torch.tensor(a)].sum())
        greedy = logits.argmax(-1).tolist()
        known = [_accepted(row, d) for row, d in zip(greedy, drafts, strict=True)]
        generated = self._greedy(batch, known, cache, len(batch[0]) + n_draft, max_new)
        return [self.tokenizer.decode(g) for g in generated], logprobs

    def _take(self, generated: list[int], token: int) -> bool:
        """Append a greedy ``token``; True when the reply is complete (EOS or a whole number)."""
        if token in self.eos_ids:
            return True
        generated.append(token)
        return bool(_DONE.search(self.tokenizer.decode(generated)))

    def _greedy(
        self,
        batch: list[tuple[int, ...]],
        known: list[list[int]],
        cache: Any,
        cache_len: int,
        max_new: int,
    ) -> list[list[int]]:
        """Greedy replies; ``known[i]``: row i's first greedy tokens (already exact).

        Rows whose reply completes within their known tokens need no decode step.
        The others restart from the shortest known run ``m`` (those tokens equal the
        row's own draft, so the cache is cropped to prompt + ``m - 1`` tokens).
        """
        torch = _torch()
        generated: list[list[int]] = [[] for _ in batch]
        open_rows = []
        for i, tokens in enumerate(known):
            trial: list[int] = []
            done = any(self._take(trial, t) for t in tokens[:max_new]) or len(trial) >= max_new
            if done:
                generated[i] = trial
            else:
                open_rows.append(i)
        if not open_rows:
            return generated
        m = min(len(known[i]) for i in open_rows)
        for i in open_rows:
            generated[i] = list(known[i][: m - 1])
        keep = len(batch[0]) + m - 1
        if cache is not None:
            if len(open_rows) < len(batch):
                cache.batch_select_indices(torch.tensor(open_rows))
            if cache_len > keep:
                _crop(cache, keep)
        sequences = torch.tensor([list(batch[i]) + known[i][: m - 1] for i in open_rows])
        current = torch.tensor([known[i][m - 1] for i in open_rows])
        finished = [False] * len(open_rows)
        for step in range(m - 1, max_new):
            for j, token in enumerate(current.tolist()):
                if not finished[j]:
                    finished[j] = self._take(generated[open_rows[j]], token)
            if all(finished) or step == max_new - 1:
                break
            if cache is not None:
                logits, cache = _forward(self.model, current[:, None], cache, keep=1)
            else:
                sequences = torch.cat([sequences, current[:, None]], dim=1)
                logits, _ = _forward(self.model, sequences, use_cache=False, keep=1)
            current = logits[:, -1].argmax(-1)
        return generated


def _accepted(greedy: list[int], draft: tuple[int, ...]) -> list[int]:
    """The greedy tokens a teacher-forced pass proves: up to and including the first
    disagreement with ``draft`` (or the token after the whole draft)."""
    out = []
    for j, token in enumerate(greedy):
        out.append(token)
        if j < len(draft) and token != draft[j]:
            break
    return out


def _common_prefix(sequences: list[tuple[int, ...]]) -> int:
    first = sequences[0]
    n = min(len(s) for s in sequences)
    for i in range(n):
        token = first[i]
        if any(s[i] != token for s in sequences):
            return i
    return n


# ---------------------------------------------------------------------- loading


@dataclass(frozen=True)
class HFModelSource:
    """A model that is loaded by a function rather than from a path or hub name.

    ``name``: the display name (profiles, file names); ``tokenizer_spec``: the
    phaseaware tokenizer spec that matches it; ``description``: how error messages
    name it; ``load``: returns the transformers causal LM (may raise ``OSError``,
    ``ValueError`` or ``ImportError``, reported as a ``BackendError``).
    """

    name: str
    tokenizer_spec: str
    description: str
    load: Callable[[], Any]


def _target(model: str) -> str:
    return model[3:] if model.startswith("hf:") else model


def resolve_model(model: str) -> tuple[str, dict[str, Any]]:
    """``(path or hub name, from_pretrained kwargs)`` for a ``--model`` value."""
    target = _target(model)
    path = Path(target).expanduser()
    if path.suffix == ".gguf":
        if not path.is_file():
            raise CalibrationError(f"GGUF file {path} does not exist; check --model")
        return str(path.parent), {"gguf_file": path.name}
    return (str(path) if path.exists() else target), {"local_files_only": True}


def default_tokenizer_spec(model: str | HFModelSource) -> str:
    """The tokenizer spec that matches ``--model`` when ``--tokenizer`` is not given."""
    if isinstance(model, HFModelSource):
        return model.tokenizer_spec
    return f"hf:{_target(model)}"


def model_display_name(model: str | HFModelSource) -> str:
    """A short model name for profiles and file names."""
    if isinstance(model, HFModelSource):
        return model.name
    target = _target(model)
    path = Path(target)
    return path.stem if path.suffix == ".gguf" else (path.name or target)


def _load(model: str | HFModelSource) -> Any:
    if isinstance(model, HFModelSource):
        return model.load()
    from transformers import AutoModelForCausalLM

    where, kwargs = resolve_model(model)
    return AutoModelForCausalLM.from_pretrained(where, **kwargs)


def load_hf_backend(
    model: str | HFModelSource,
    tokenizer: Tokenizer,
    *,
    threads: int | None = 1,
    reuse_prefix: bool = True,
    batch: bool = True,
    model_info: Mapping[str, Any] | None = None,
) -> HFBackend:
    """Load ``model`` and wrap it in an :class:`HFBackend` (``model_info``: see there)."""
    torch = _torch()
    if threads:
        torch.set_num_threads(threads)
    try:
        loaded = _load(model)
    except CalibrationError:
        raise
    except (OSError, ValueError, ImportError) as exc:
        what = model.description if isinstance(model, HFModelSource) else repr(model)
        raise BackendError(
            f"cannot load {what}: {exc}; pass --model with a local folder, hf:<name> cached "
            "locally, or a .gguf file"
        ) from exc
    return HFBackend(
        loaded,
        tokenizer,
        name=model_display_name(model),
        reuse_prefix=reuse_prefix,
        batch=batch,
        threads=threads,
        model_info=model_info,
    )
