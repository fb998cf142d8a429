"""A 100 MB document against an 8K-token budget: dropped unread, memory stays bounded.

    python benchmarks/oversize_document.py [--mb 100] [--budget 8000]

For each tokenizer family (tiktoken o200k_base; the Hugging Face DeepSeek-V4 tokenizer) a
fresh process assembles [evidence, a MB-sized document, another note] and prints the
dropped reason, the prompt's token count, the time and the process's peak RSS. Before the
bound, the HF tokenizer tried to allocate ~2.9 GB on such a document and aborted Python.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = """
import json, resource, sys, time
from phaseaware import assemble
from phaseaware.tokenizers import load_tokenizer
spec, mb, budget = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
tok = load_tokenizer(spec)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
huge = ("lorem ipsum dolor sit amet " * (mb * 1024 * 1024 // 27 + 1))[: mb * 1024 * 1024]
start = time.perf_counter()
result = assemble(
    ["The access code for Alice is 123.", huge, "Bob likes tea."],
    tokenizer=tok, chat_format="chatml", question="What is the access code for Alice?",
    budget_tokens=budget,
)
print(json.dumps({
    "spec": spec, "document_chars": len(huge), "prompt_tokens": result.token_count,
    "dropped": [[d.chunk_id, d.reason] for d in result.dropped],
    "seconds": round(time.perf_counter() - start, 2),
    "peak_rss_mb_before_document": round(base / 1024),
    "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
}))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--budget", type=int, default=8000)
    args = parser.parse_args()
    failed = 0
    for spec in ("tiktoken:o200k_base", "deepseek-v4"):
        proc = subprocess.run(
            [sys.executable, "-c", CHILD, spec, str(args.mb), str(args.budget)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        if proc.returncode != 0:
            failed += 1
            print(f"{spec}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
            continue
        row = json.loads(proc.stdout)
        print(json.dumps(row, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
