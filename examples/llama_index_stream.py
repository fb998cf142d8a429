"""Streaming with LlamaIndex, offline: a phase-aware query engine with streaming=True.

The answer streams from ``phaseaware serve-reference`` through LlamaIndex's own
``OpenAILike``; ``stream_options={"include_usage": True}`` asks the server for its usage on
the stream's last chunk, and the synthesizer checks that prompt token count against the
plan when the stream ends. The example exits 1 when the answer is wrong or no usage came.

    python examples/llama_index_stream.py [--profile FILE]   # after the README's LlamaIndex line
"""

from __future__ import annotations

from example_cli import example_parser, needs, preflight, reference_profile, served
from example_cli import run as run_example

preflight()  # a dead --base-url fails before the imports below

with needs("llama-index"):
    from llama_index.core import PromptTemplate
    from llama_index.core.schema import TextNode
    from llama_index.llms.openai_like import OpenAILike
    from llama_index.postprocessor.phaseaware import SENT_KEY, phaseaware_query_engine
    from llama_index_rag import DOCUMENTS, EXPECTED, BM25Retriever


def main(argv: list[str] | None = None) -> int:
    parser = example_parser(__doc__)
    parser.add_argument("--question", default="What is the access code for Hugo ?")
    args = parser.parse_args(argv)
    nodes = [TextNode(text=text, id_=name) for name, text in DOCUMENTS.items()]
    with served(args) as base_url:  # a given --base-url is checked first (3 s)
        profile = reference_profile(args.profile)
        llm = OpenAILike(
            model="phaseaware-reference",
            api_base=base_url,
            api_key="x",
            is_chat_model=True,
            max_tokens=4,
            temperature=0.0,
            max_retries=0,
            additional_kwargs={"stream_options": {"include_usage": True}},
        )
        engine = phaseaware_query_engine(
            BM25Retriever(nodes),
            llm=llm,
            tokenizer="reference",
            chat_format="hf",
            profile=profile,
            budget_tokens=512,
            text_qa_template=PromptTemplate("{context_str}\n\n{query_str}"),
            on_mismatch="raise",
            streaming=True,
        )
        response = engine.query(args.question)
        print("streamed: ", end="", flush=True)
        pieces = []
        for piece in response.response_gen:
            pieces.append(piece)
            print(repr(piece), end=" ", flush=True)
        print()
    answer = "".join(pieces).strip()
    expected = EXPECTED.get(args.question)
    ok = expected is None or answer == expected
    print(f"{args.question}  ->  {answer!r}  (expected {expected}: {'OK' if ok else 'WRONG'})")
    sent = response.metadata[SENT_KEY] if response.metadata else None
    check = getattr(sent, "check", None)
    if check is None:
        print("usage check: no usage arrived (is stream_options include_usage set?)")
        return 1
    print(f"usage check: planned {check.planned_tokens} tokens, server counted "
          f"{check.reported_tokens}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(run_example(main))
