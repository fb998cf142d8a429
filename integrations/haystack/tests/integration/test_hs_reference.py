"""End to end on the reference model, through Haystack's real ``OpenAIChatGenerator`` over
HTTP: the phase-aware builder against ChatPromptBuilder and LostInTheMiddleRanker on the
demo's held-out questions (paired), prompt token counts equal to the server's on every
call, a YAML round trip and the async path sending the same messages, and the example."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from haystack import Pipeline

from phaseaware.demo.questions_file import demo_questions

pytestmark = [pytest.mark.slow, pytest.mark.needs_trained_reference]

QUESTIONS = 60


def test_phase_aware_answers_at_least_as_many_as_both_baselines(
    bench: Any, base_url: str, profile_path: str
) -> None:
    questions = demo_questions(count=QUESTIONS, seed=0)
    result = bench.compare(questions, base_url=base_url, profile=profile_path)
    print("\n" + "\n".join(result.lines()))
    assert result.usage_checks == QUESTIONS * 3  # every call: the server's count, equal
    phase = sum(result.right["phase-aware"])
    for other in ("ChatPromptBuilder", "LostInTheMiddleRanker"):
        wins, losses, _ = result.paired(other)
        assert phase >= sum(result.right[other]), result.lines()
        assert wins >= losses, result.lines()


def test_yaml_round_trip_and_async_send_the_same_messages(
    bench: Any, base_url: str, profile_path: str
) -> None:
    questions = demo_questions(count=3, seed=0)
    store = bench.document_store(questions)
    pipe = bench.pipeline("phase-aware", store=store, base_url=base_url, profile=profile_path)
    loaded = Pipeline.loads(pipe.dumps())
    sent = {q.id: bench.ask(pipe, q) for q in questions}
    for q in questions:
        assert bench.ask(loaded, q) == sent[q.id]  # same messages, same answer, same count

    async def run_all() -> dict[str, Any]:  # one event loop: the async client lives in it
        out = {}
        for q in questions:
            data = {
                "retriever": {"query": q.question, "filters": {
                    "field": "meta.question", "operator": "==", "value": q.id}},
                "builder": {"question": q.question},
            }  # fmt: skip
            out[q.id] = await pipe.run_async(data, include_outputs_from={"builder"})
        return out

    for q_id, done in asyncio.run(run_all()).items():
        assert tuple(done["builder"]["prompt"]) == sent[q_id].messages
        assert done["check"]["usage_check"]["ok"]


def test_the_example_answers_every_question_right(
    example: Any, base_url: str, profile_path: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = example.main(["--base-url", base_url, "--profile", profile_path])
    out = capsys.readouterr().out
    assert "4 of 4 answers right" in out, out
    assert out.count("usage.prompt_tokens checked") == 4
    assert "YAML round trip: the same messages" in out
    assert status == 0
