"""Write examples/score_samples.jsonl: a real per-sample eval log for `phaseaware score`.

Asks a running ``phaseaware serve-reference`` the first ``--questions`` of the shipped
RAG questions, each in retrieval order (phaseaware assembles nothing: strategy ``none``,
no padding), and logs one line per answer in the plain JSONL format ``score`` reads:
``messages`` (what was sent), ``needle`` (the asked fact as it appears in the prompt; its
first token, the name, is the key), ``correct`` and the server's ``prompt_tokens``.

    phaseaware serve-reference --port 8000 &
    python scripts/make_score_sample.py --base-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import json
import urllib.request
from pathlib import Path

from phaseaware import AssemblyOptions, assemble
from phaseaware.atomic import atomic_write_text
from phaseaware.demo.questions_file import reference_questions

OUT = Path(__file__).resolve().parents[1] / "examples" / "score_samples.jsonl"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--base-url", required=True, help="a running serve-reference")
    parser.add_argument("--questions", type=int, default=200, help="questions (default 200)")
    args = parser.parse_args()
    as_is = AssemblyOptions(strategy="none", pad=False, repeat=False, length_pad=False)
    lines = []
    for q in reference_questions()[: args.questions]:
        result = assemble(
            list(q.chunks), tokenizer="reference", chat_format="hf", question=q.question,
            budget_tokens=512, options=as_is,
        )  # fmt: skip
        body = {"model": "phaseaware-reference", "messages": result.messages, "max_tokens": 8,
                "temperature": 0}  # fmt: skip
        request = urllib.request.Request(
            f"{args.base_url.rstrip('/')}/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            reply = json.load(response)
        answer = reply["choices"][0]["message"]["content"].strip()
        name = q.question.removeprefix("What is the access code for ").removesuffix(" ?")
        record = {
            "id": q.id,
            "messages": result.messages,
            "needle": f"{name} is {q.answers[0]}",
            "correct": answer == q.answers[0],
            "prompt_tokens": reply["usage"]["prompt_tokens"],
        }
        lines.append(json.dumps(record))
    atomic_write_text(OUT, "\n".join(lines) + "\n")
    print(f"wrote {len(lines)} samples to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
