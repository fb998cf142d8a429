"""Benchmark: assembly time vs one tokenization of the final prompt, padding, accuracy.

Run: ``python benchmarks/assembly.py [--repeats N] [--quick]``. Seeded synthetic
chunks (generated here, nothing downloaded). Targets (issue 15): cold assemble
<= 2x one encode of the final prompt, warm (chunk-token cache hit) <= 0.5x.

Cases: (a) 20 x 300 tokens and (b) 400 chunks ~128K, one vault-code fact each
(their outputs are the invariant hashes); (c) chunks dense in the question's
terms (>= 10 mentions each); (d) CJK prose; (e) source code; (f) 1,000 and
10,000 short chunks. Each on tiktoken cl100k, o200k and the DeepSeek-V4
tokenizer, with peers in the same run: LangChain's and LlamaIndex's
LongContextReorder and one plain encode. Times are medians of N repeats (CPU
time of this process: the machine is shared). Cold = a fresh
``ChunkTokenCache``; warm = the same chunks again with it. Every case asserts
that the result is identical cold, warm and with the cache disabled.
Also printed: planner scaling (chunks x period), assembly time by period, and
the tracemalloc peak of a 128K-token assembly.

The cache-aware figures (issue 39: warm <= 0.2x, cold <= 1.0x one encode): the
DeepSeek-V4 dense case (20 x 300 tokens, ``chat_format="none"``) timed with the
report (``unchanged_prefix_tokens`` counted, as every call does) and without it
(``report.build.cache_figures`` stubbed for the timing only), side by side with
the peers, in the same run. That table gives CPU and wall-clock (``perf_counter``)
ratios of the same repeats, and a floor row: batch-encoding just the chunk texts (one
``encode_batch_fast`` of the 20 texts, the backend call ``tok.encode`` makes), what any
exact assembler spends cold at least, as a ratio of the same one encode.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from phaseaware.assembly import AssemblyOptions, AssemblyResult, Chunk, assemble
from phaseaware.assembly.retokenize.windowed import ChunkTokenCache
from phaseaware.chat import get_chat_format
from phaseaware.profiles.registry import get_profile, list_profiles
from phaseaware.tokenizers import load_tokenizer, registry
from phaseaware.tokenizers.hf import HFTokenizer, load_hf_tokenizer

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.baselines import model_encode  # noqa: E402

_WORD_TEXT = (
    "archive battery cable delta engine forest garden harbor island journal kernel ledger "
    "market needle orbit parcel quarry river signal timber umbrella valley window yard zenith "
    "amber bronze copper dune ember frost glacier hollow ivory jasper kelp lantern meadow "
    "north onyx pepper quartz raven saffron tundra ultra velvet willow xenon yellow zephyr "
    "the of and to in is was for on with as by at from that this which were are be"
)
WORDS = _WORD_TEXT.split()
QUESTION = "Which vault code opens the Tamarind archive?"


def make_chunks(n: int, tokens_per_chunk: int, seed: int) -> list[Chunk]:
    """``n`` chunks of roughly ``tokens_per_chunk`` tokens; each states one vault code."""
    rng = np.random.default_rng(seed)
    chunks = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(tokens_per_chunk * 0.8)).tolist()
        sentences = [
            " ".join(words[j : j + 12]).capitalize() + "." for j in range(0, len(words), 12)
        ]
        fact = f"The vault code of the Tamarind archive {i} is {int(rng.integers(1000, 9999))}."
        sentences.insert(int(rng.integers(0, len(sentences) + 1)), fact)
        chunks.append(
            Chunk(
                text=" ".join(sentences),
                score=float(np.round(rng.random(), 4)),
                id=f"doc-{i:03d}",
                evidence=(f"vault code of the Tamarind archive {i} is",),
            )
        )
    return chunks


def best_of(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def timing_rows(repeats: int) -> list[str]:
    rows = [
        f"{'tokenizer':<22} {'case':<24} {'prompt tok':>10} {'assemble s':>10} "
        f"{'tokenize s':>10} {'ratio':>6}"
    ]
    profile = get_profile("deepseek-v4-flash-base")
    cases = (("(a) 20 x 300 tok", 20, 300, 8_000), ("(b) 400 chunks ~128K", 400, 320, 140_000))
    for spec, layout_name in (("tiktoken:cl100k_base", "chatml"), ("deepseek-v4", "deepseek-v4")):
        tok = load_tokenizer(spec)
        fmt = get_chat_format(layout_name, tok)
        options = AssemblyOptions(allow_tokenizer_mismatch=True)
        for label, n, size, budget in cases:
            chunks = make_chunks(n, size, seed=n)

            def run(chunks=chunks, tok=tok, fmt=fmt, budget=budget, options=options):
                return assemble(
                    chunks, tokenizer=tok, chat_format=fmt, question=QUESTION,
                    profile=profile, budget_tokens=budget, options=options,
                )  # fmt: skip

            result = run()  # warm caches (filler search, tables) once
            t_assemble = best_of(run, repeats)
            t_tokenize = best_of(lambda r=result, tok=tok: tok.tokenize(r.prompt), repeats)
            rows.append(
                f"{spec:<22} {label:<24} {result.token_count:>10} {t_assemble:>10.4f} "
                f"{t_tokenize:>10.4f} {t_assemble / t_tokenize:>6.2f}"
            )
    return rows


def accuracy_rows() -> list[str]:
    rows = [
        f"{'profile':<26} {'case':<22} {'padding %':>9} {'naive acc':>9} {'phase acc':>9} "
        f"{'repeat':>6}"
    ]
    tok = load_tokenizer("deepseek-v4")
    fmt = get_chat_format("deepseek-v4", tok)
    names = sorted({e.name for e in list_profiles() if e.name.startswith("deepseek")})
    for name in names:
        profile = get_profile(name)
        for label, n, size, budget in (
            ("20 x 300 tok", 20, 300, 8_000),
            ("400 x 320 tok", 400, 320, 140_000),
        ):
            result = assemble(
                make_chunks(n, size, seed=n), tokenizer=tok, chat_format=fmt, question=QUESTION,
                profile=profile, budget_tokens=budget,
                options=AssemblyOptions(allow_tokenizer_mismatch=True),
            )  # fmt: skip
            context_tokens = sum(p.token_end - p.token_start for p in result.placements)
            share = 100.0 * result.padding_tokens / max(1, context_tokens)
            rows.append(
                f"{name:<26} {label:<22} {share:>8.2f}% {result.naive_expected_accuracy:>9.3f} "
                f"{result.expected_accuracy:>9.3f} {result.repeated_tokens:>6}"
            )
    return rows


DENSE_TERMS = ("vault", "code", "opens", "Tamarind", "archive")
_CJK = (
    "数据库系统在处理大量请求时需要保持一致性和可用性。研究人员提出了新的方法来解决这个问题，"
    "并在多个实验中验证了其效果。東京の研究所では、分散処理の性能を改善するための実験が行われた。"
    "结果表明，该方法在延迟和吞吐量方面都有明显提升。"
)
_CODE = (
    "def {name}(items: list[int], limit: int = {n}) -> dict[str, int]:\n"
    '    """Count the items below ``limit``."""\n'
    "    counts: dict[str, int] = {{}}\n"
    "    for i, item in enumerate(items):\n"
    "        if item < limit and i % {m} == 0:\n"
    "            counts[str(item)] = counts.get(str(item), 0) + 1\n"
    "    return counts\n\n"
)


def make_dense(n: int, tokens_per_chunk: int, seed: int) -> list[Chunk]:
    """Chunks with the question's terms every ~10 words (>= 10 mentions per chunk)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = rng.choice(WORDS, size=int(tokens_per_chunk * 0.8)).tolist()
        for j in range(0, len(words), 10):
            words[j] = str(rng.choice(DENSE_TERMS))
        text = " ".join(words).capitalize() + "."
        out.append(Chunk(text=text, score=float(np.round(rng.random(), 4)), id=f"dense-{i:04d}"))
    return out


def make_cjk(n: int, seed: int) -> list[Chunk]:
    rng = np.random.default_rng(seed)
    sentences = [s + "。" for s in _CJK.split("。") if s]
    out = []
    for i in range(n):
        picked = rng.choice(sentences, size=8).tolist()
        text = (
            f"文档{i}："
            + "".join(picked)
            + "金库代码是"
            + str(int(rng.integers(1000, 9999)))
            + "。"
        )
        out.append(Chunk(text=text, score=float(np.round(rng.random(), 4)), id=f"cjk-{i:04d}"))
    return out


def make_code(n: int, seed: int) -> list[Chunk]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        body = "".join(
            _CODE.format(name=f"count_{i}_{j}", n=int(rng.integers(10, 999)), m=j + 2)
            for j in range(4)
        )
        out.append(Chunk(text=body, score=float(np.round(rng.random(), 4)), id=f"code-{i:04d}"))
    return out


def make_short(n: int, seed: int) -> list[Chunk]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS, size=14).tolist())
        text = f"Note {i}: {words} vault code {int(rng.integers(1000, 9999))}."
        out.append(Chunk(text=text, score=float(np.round(rng.random(), 4)), id=f"s-{i:05d}"))
    return out


def suite(quick: bool) -> list[tuple[str, Callable[[], list[Chunk]], int]]:
    """(label, chunk maker, budget tokens) of every timed case."""
    cases: list[tuple[str, Callable[[], list[Chunk]], int]] = [
        ("(a) 20 x 300 tok", lambda: make_chunks(20, 300, seed=20), 8_000),
        ("(b) 400 chunks ~128K", lambda: make_chunks(400, 320, seed=400), 140_000),
        ("(c) dense 20 x 300", lambda: make_dense(20, 300, seed=3), 8_000),
        ("(c) dense 400 x 300", lambda: make_dense(400, 300, seed=4), 140_000),
        ("(d) CJK 100 chunks", lambda: make_cjk(100, seed=5), 60_000),
        ("(e) code 100 chunks", lambda: make_code(100, seed=6), 80_000),
        ("(f) 1,000 short", lambda: make_short(1_000, seed=7), 60_000),
        ("(f) 10,000 short", lambda: make_short(10_000, seed=8), 500_000),
    ]
    return cases[:3] if quick else cases


TOKENIZERS = (
    ("tiktoken:cl100k_base", "chatml"),
    ("tiktoken:o200k_base", "chatml"),
    ("deepseek-v4", "deepseek-v4"),
)


def _median_cpu(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times)


def _median_times(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Medians of (CPU time of this process, wall-clock time) over the same repeats."""
    cpu, wall = [], []
    for _ in range(repeats):
        c0, w0 = time.process_time(), time.perf_counter()
        fn()
        w1, c1 = time.perf_counter(), time.process_time()
        cpu.append(c1 - c0)
        wall.append(w1 - w0)
    return statistics.median(cpu), statistics.median(wall)


def _doc(result) -> str:  # type: ignore[no-untyped-def]
    return json.dumps({"prompt": result.prompt, **result.to_dict()}, sort_keys=True)


def _langchain_reorder() -> Callable[[list[Chunk]], object]:
    """LangChain's LongContextReorder (``langchain_community``), or its algorithm.

    langchain 1.x moved the transformer to ``langchain_community``; when that is
    not installed the same few lines (reverse, then alternate front/back) run
    on ``langchain_core`` Documents, labelled as such in the output.
    """
    from langchain_core.documents import Document

    try:
        from langchain_community.document_transformers import LongContextReorder

        reorder = LongContextReorder()

        def run(chunks: list[Chunk]) -> object:
            docs = [Document(page_content=c.text, metadata={"score": c.score}) for c in chunks]
            return reorder.transform_documents(docs)

        return run
    except ImportError:

        def litm(chunks: list[Chunk]) -> object:
            docs = [Document(page_content=c.text, metadata={"score": c.score}) for c in chunks]
            docs.reverse()
            out: list[Document] = []
            for i, doc in enumerate(docs):
                if i % 2 == 1:
                    out.append(doc)
                else:
                    out.insert(0, doc)
            return out

        return litm


def _llamaindex_reorder() -> Callable[[list[Chunk]], object]:
    from llama_index.core.postprocessor import LongContextReorder
    from llama_index.core.schema import NodeWithScore, TextNode

    reorder = LongContextReorder()

    def run(chunks: list[Chunk]) -> object:
        nodes = [NodeWithScore(node=TextNode(text=c.text), score=c.score) for c in chunks]
        return reorder.postprocess_nodes(nodes)

    return run


def case_rows(repeats: int, quick: bool) -> list[str]:
    try:
        import langchain_community  # noqa: F401

        lc_label = "LC"
    except ImportError:
        lc_label = "LC*"
    rows = [
        f"{'tokenizer':<21} {'case':<22} {'tokens':>7} {'encode ms':>9} {'cold x':>6} "
        f"{'warm x':>6} {'verify':>8} {lc_label + ' x':>6} {'LI x':>6} {'encode x':>8}"
    ]
    print(rows[0], flush=True)
    profile = get_profile("deepseek-v4-flash-base")
    options = AssemblyOptions(allow_tokenizer_mismatch=True)
    lc, li = _langchain_reorder(), _llamaindex_reorder()
    for spec, layout_name in TOKENIZERS:
        tok = load_tokenizer(spec)
        if isinstance(tok, HFTokenizer):  # as in a process past its first 1M characters
            tok.prepare_rank_engine()
        fmt = get_chat_format(layout_name, tok)
        for label, make, budget in suite(quick):
            chunks = make()

            def run(cache, chunks=chunks, tok=tok, fmt=fmt, budget=budget):  # type: ignore[no-untyped-def]
                return assemble(
                    chunks, tokenizer=tok, chat_format=fmt, question=QUESTION,
                    profile=profile, budget_tokens=budget, options=options, cache=cache,
                )  # fmt: skip

            plain = run(None)  # also warms the filler search
            warm_cache = ChunkTokenCache()
            cold = run(warm_cache)
            warm = run(warm_cache)
            assert _doc(plain) == _doc(cold) == _doc(warm), f"cache changed {spec} {label}"
            encode = model_encode(tok)
            t_encode = _median_cpu(lambda p=plain.prompt, enc=encode: enc(p), repeats)
            t_cold = _median_cpu(lambda: run(ChunkTokenCache()), repeats)
            t_warm = _median_cpu(lambda c=warm_cache: run(c), repeats)
            t_lc = _median_cpu(lambda c=chunks: lc(c), repeats)
            t_li = _median_cpu(lambda c=chunks: li(c), repeats)
            rows.append(
                f"{spec:<21} {label:<22} {plain.token_count:>7} {t_encode * 1e3:>9.1f} "
                f"{t_cold / t_encode:>6.2f} {t_warm / t_encode:>6.2f} {warm.verification:>8} "
                f"{t_lc / t_encode:>6.3f} {t_li / t_encode:>6.3f} {1.0:>8.2f}"
            )
            print(rows[-1], flush=True)
    if lc_label == "LC*":
        rows.append(
            "LC*: langchain_community is not installed (langchain 1.x moved LongContextReorder "
            "there); its algorithm runs on langchain_core Documents"
        )
    return rows


_FIGURES = "cache_figures"  # report.build's name for the cache-aware figures


@contextlib.contextmanager
def _without_report() -> Iterator[None]:
    """The report stage without its cache-aware figures (``unchanged_*`` left 0/None)."""
    from phaseaware.assembly.report import build

    kept = getattr(build, _FIGURES)
    setattr(build, _FIGURES, lambda setup, text, *, starts: (0, None))
    try:
        yield
    finally:
        setattr(build, _FIGURES, kept)


def _deepseek_v4(*, twin: bool) -> HFTokenizer:
    """A new DeepSeek-V4 tokenizer object: with its rank-BPE twin built, or without any."""
    kept = os.environ.get("PHASEAWARE_RANK_BPE")
    os.environ["PHASEAWARE_RANK_BPE"] = "on" if twin else "off"
    try:
        tok = load_hf_tokenizer(
            str(registry.deepseek_v4_dir()), spec="deepseek-v4", bos_text=registry.DEEPSEEK_V4_BOS
        )
        assert tok.prepare_rank_engine() is twin
    finally:
        if kept is None:
            del os.environ["PHASEAWARE_RANK_BPE"]
        else:
            os.environ["PHASEAWARE_RANK_BPE"] = kept
    return tok


def report_rows(repeats: int) -> list[str]:
    """DeepSeek-V4 dense 20 x 300, chat format none: with and without the cache-aware report,
    with the rank-BPE twin (a process past its first 1M characters) and with Hugging Face
    ``tokenizers`` alone (before that), in CPU and wall-clock time, each with its floor
    (batch-encoding the chunk texts alone). Ratios: to one encode of the prompt by the
    model's own tokenizer (Hugging Face ``tokenizers``)."""
    engines = {"twin": _deepseek_v4(twin=True), "HF": _deepseek_v4(twin=False)}
    profile = get_profile("deepseek-v4-flash-base")
    options = AssemblyOptions(allow_tokenizer_mismatch=True)
    chunks = make_dense(20, 300, seed=3)
    texts = [c.text for c in chunks]
    lc, li = _langchain_reorder(), _llamaindex_reorder()
    timed: dict[tuple[str, str], tuple[tuple[float, float], tuple[float, float] | None]] = {}
    docs = []
    for engine, tok in engines.items():
        fmt = get_chat_format("none", tok)

        def run(cache: ChunkTokenCache | None, tok=tok, fmt=fmt) -> AssemblyResult:  # type: ignore[no-untyped-def]
            return assemble(
                chunks, tokenizer=tok, chat_format=fmt, question=QUESTION, profile=profile,
                budget_tokens=8_000, options=options, cache=cache,
            )  # fmt: skip

        plain = run(None)
        warm_cache = ChunkTokenCache()
        cold = run(warm_cache)
        warm = run(warm_cache)
        docs += [_doc(plain), _doc(cold), _doc(warm)]
        for label in ("with", "without"):
            with _without_report() if label == "without" else contextlib.nullcontext():
                timed[engine, label] = (
                    _median_times(lambda run=run: run(ChunkTokenCache()), repeats),
                    _median_times(lambda run=run, c=warm_cache: run(c), repeats),
                )
        floor = lambda tok=tok: tok.token_starts_batch(texts)  # noqa: E731
        timed[engine, "floor"] = (_median_times(floor, repeats), None)
    assert len(set(docs)) == 1, "the engine or the cache changed the dense result"
    encode = _median_times(lambda: model_encode(engines["HF"])(plain.prompt), repeats)
    own = _median_times(lambda: engines["twin"].encode(plain.prompt), repeats)
    lc_t = _median_times(lambda: lc(chunks), repeats)
    li_t = _median_times(lambda: li(chunks), repeats)
    rows = [
        f"DeepSeek-V4 dense 20 x 300, chat_format none: {plain.token_count} tokens, "
        f"unchanged_prefix_tokens {plain.unchanged_prefix_tokens}; one encode of the prompt "
        f"by Hugging Face tokenizers {encode[0] * 1e3:.1f} ms CPU, {encode[1] * 1e3:.1f} ms "
        f"wall (by the twin: {own[0] * 1e3:.1f} ms CPU, {own[0] / encode[0]:.2f}x)",
        f"{'clock':<5} {'engine':<6} {'report':<8} {'cold ms':>8} {'cold x':>7} {'warm ms':>8} "
        f"{'warm x':>7} {'LC x':>6} {'LI x':>6}",
    ]
    for k, clock in enumerate(("CPU", "wall")):
        for (engine, label), (t_cold, t_warm) in timed.items():
            row = f"{clock:<5} {engine:<6} {label:<8} {t_cold[k] * 1e3:>8.1f} {t_cold[k] / encode[k]:>7.2f}"
            if t_warm is None:
                rows.append(f"{row}{'':>17}  (tokenizing the {len(texts)} chunk texts alone)")
            else:
                rows.append(
                    f"{row} {t_warm[k] * 1e3:>8.1f} {t_warm[k] / encode[k]:>7.2f} "
                    f"{lc_t[k] / encode[k]:>6.3f} {li_t[k] / encode[k]:>6.3f}"
                )
    return rows


def synthetic_profile(period: int):  # type: ignore[no-untyped-def]
    """deepseek-v4-flash-base with ``period`` residues (deterministic accuracies)."""
    base = get_profile("deepseek-v4-flash-base")
    acc = tuple(round(0.55 + 0.4 * ((r * 37) % period) / period, 4) for r in range(period))
    return dataclasses.replace(
        base, period=period, residue_accuracy=acc, n=(100,) * period,
        ci_low=acc, ci_high=acc, reliability=None,
    )  # fmt: skip


def planner_rows(repeats: int, quick: bool) -> list[str]:
    """Planning alone (order, repeat, pads from in-context counts): time by chunks x period."""
    from phaseaware.assembly.plan import planner
    from phaseaware.assembly.prepare.measured_request import prepare, repeat_offer

    tok = load_tokenizer("tiktoken:o200k_base")
    fmt = get_chat_format("chatml", tok)
    options = AssemblyOptions(allow_tokenizer_mismatch=True)
    rows = [f"{'chunks':>7} {'period':>6} {'plan ms':>8} {'per chunk us':>12}"]
    for period in (8, 128):
        profile = synthetic_profile(period)
        for n in (100, 1_000) if quick else (100, 1_000, 10_000):
            chunks = make_short(n, seed=n)
            setup = prepare(
                chunks, tokenizer=tok, chat_format=fmt, question=QUESTION, system=None,
                profile=profile, budget=10**7, options=options,
            )  # fmt: skip
            admitted = list(range(n))
            planned = planner.start_plan(setup.request)

            def plan(setup=setup, admitted=admitted, planned=planned) -> object:
                _, offer = repeat_offer(setup, planned)  # measures the repeat block, as before
                return planner.initial(
                    request=setup.request, weights=planned.weights, admitted=admitted,
                    tables=setup.request.tables, repeat=offer,
                )  # fmt: skip

            t = _median_cpu(plan, repeats)
            rows.append(f"{n:>7} {period:>6} {t * 1e3:>8.1f} {t / n * 1e6:>12.1f}")
    return rows


def period_rows(quick: bool) -> list[str]:
    """A whole assemble (20 x 300 tok) by profile period, first call (filler qualified)."""
    tok = load_tokenizer("tiktoken:o200k_base")
    fmt = get_chat_format("chatml", tok)
    options = AssemblyOptions(allow_tokenizer_mismatch=True)
    rows = [f"{'period':>6} {'first s':>8} {'again s':>8}"]
    chunks = make_chunks(20, 300, seed=20)
    for period in (8, 128, 512):
        profile = synthetic_profile(period)
        times = []
        for _ in range(2):
            start = time.process_time()
            assemble(
                chunks, tokenizer=tok, chat_format=fmt, question=QUESTION, profile=profile,
                budget_tokens=8_000 + 4 * period, options=options,
            )  # fmt: skip
            times.append(time.process_time() - start)
        rows.append(f"{period:>6} {times[0]:>8.3f} {times[1]:>8.3f}")
    return rows


def memory_rows() -> list[str]:
    """tracemalloc peak of case (b) (~128K tokens, o200k) and the warm cache's size."""
    tok = load_tokenizer("tiktoken:o200k_base")
    fmt = get_chat_format("chatml", tok)
    profile = get_profile("deepseek-v4-flash-base")
    options = AssemblyOptions(allow_tokenizer_mismatch=True)
    chunks = make_chunks(400, 320, seed=400)
    rows = []
    for label, cache in (("no cache", None), ("cold cache", ChunkTokenCache())):
        tracemalloc.start()
        result = assemble(
            chunks, tokenizer=tok, chat_format=fmt, question=QUESTION, profile=profile,
            budget_tokens=140_000, options=options, cache=cache,
        )  # fmt: skip
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        extra = f", cache holds {cache.nbytes / 2**20:.1f} MiB" if cache is not None else ""
        rows.append(
            f"128K assembly ({result.token_count} tokens, {label}): "
            f"tracemalloc peak {peak / 2**20:.1f} MiB{extra}"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats (median)")
    parser.add_argument("--quick", action="store_true", help="fewer cases (smoke run)")
    parser.add_argument("--no-accuracy", action="store_true", help="skip the accuracy table")
    parser.add_argument(
        "--report-only", action="store_true", help="only the with/without-report table"
    )
    args = parser.parse_args()
    print("\n".join(report_rows(args.repeats)), flush=True)
    print()
    if args.report_only:
        return
    rows = case_rows(args.repeats, args.quick)
    print(rows[-1] if rows[-1].startswith("LC*") else "")
    print()
    print("\n".join(planner_rows(args.repeats, args.quick)))
    print()
    print("\n".join(period_rows(args.quick)))
    print()
    print("\n".join(memory_rows()))
    if not args.no_accuracy:
        print()
        print("\n".join(accuracy_rows()))


if __name__ == "__main__":
    main()
