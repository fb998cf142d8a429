"""``phaseaware compare`` against ``phaseaware serve-reference`` (the official openai client
over real HTTP): the shipped questions reproduce the demo's figures, and phase-aware beats
both controls (order-only, placebo); questions whose evidence already sits on good
residues show no significant difference."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("openai")
pytest.importorskip("scipy")

from phaseaware.cli.main import main  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.needs_trained_reference]


@pytest.fixture(scope="module")
def demo_profile(tmp_path_factory):
    """The profile `phaseaware demo` calibrates (40 base prompts, seed 0)."""
    out = tmp_path_factory.mktemp("demo")
    assert main(["demo", "--questions", "1", "--out", str(out), "--json"]) == 0
    return out / "phaseaware-reference.json"


def _compare(served, profile, tmp_path, *extra):
    server, engine = served
    argv = ["compare", *extra, "--profile", str(profile), "--budget-tokens", "512"]
    argv += ["--backend", "openai", "--base-url", server.base_url, "--model", engine.model_name]
    argv += ["--tokenizer", "reference", "--chat-format", "hf", "--max-tokens", "8"]
    argv += ["--concurrency", "6", "--log", str(tmp_path / "answers.jsonl"), "--json"]
    return argv


def test_shipped_questions_reproduce_the_demo_through_the_server(
    served, demo_profile, tmp_path, capsys
):
    capsys.readouterr()
    argv = _compare(served, demo_profile, tmp_path, "--reference-questions")
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {row["arrangement"]: row for row in doc["rows"]}
    # `phaseaware demo` (in-process model) prints 85.0%, 83.5% and 100.0%
    assert (rows["naive"]["correct"], rows["naive"]["total"]) == (340, 400)
    assert rows["lost-in-the-middle"]["correct"] == 334
    assert rows["phase-aware"]["correct"] == 400
    paired = {t["other"]: t for t in doc["paired"]}
    # phase-aware beats naive and both controls: the gain is phase placement's
    for other in ("naive", "order-only", "placebo"):
        assert paired[other]["p_value"] < 0.01, paired[other]
        assert paired[other]["wins"] > paired[other]["losses"], paired[other]
    assert doc["n_requests"] == 2000
    assert doc["verdict"]["placement_helped"]
    assert doc["verdict"]["carried_by"] in ("placement", "both")
    assert doc["warnings"] == []  # the demo's profile was measured on this model, format
    assert sum(rows["naive"]["evidence_residues"]) == 400
    assert rows["phase-aware"]["padding_tokens"] > 0
    # the same command again reuses every answer: no request
    assert main(argv) == 0
    again = json.loads(capsys.readouterr().out)
    assert again["n_requests"] == 0 and again["n_skipped"] == 2000
    assert again["rows"] == doc["rows"]


def test_evidence_on_good_residues_shows_no_significant_difference(
    served, demo_profile, tmp_path, capsys
):
    """Questions whose evidence lands on a reliable residue in retrieval order and in the
    lost-in-the-middle order: phase-aware has nothing to fix there."""
    from phaseaware.compare.arrange import Arranger
    from phaseaware.demo.questions_file import reference_questions
    from phaseaware.profiles.io import load_profile
    from phaseaware.tokenizers import load_tokenizer

    profile = load_profile(demo_profile)
    good = {r for r, a in enumerate(profile.residue_accuracy) if a >= 0.97}
    assert good and len(good) < profile.period
    arranger = Arranger(
        tokenizer=load_tokenizer("reference"), chat_format="hf", profile=profile, budget_tokens=512
    )
    kept = []
    for q in reference_questions():
        residues = []
        for arrangement in ("naive", "lost-in-the-middle"):
            result = arranger.assemble(
                arrangement, chunks=q.chunks, question=q.question, system=None
            )
            top = next(p for p in result.placements if p.chunk_id == q.top_evidence_id)
            residues.append(top.residues[0])
        if set(residues) <= good:
            kept.append(q)
        if len(kept) == 60:
            break
    path = tmp_path / "good.jsonl"
    path.write_text("".join(json.dumps(q.to_dict()) + "\n" for q in kept), encoding="utf-8")
    capsys.readouterr()
    # the three arrangements only: the placebo aims at bad residues on purpose
    argv = _compare(served, demo_profile, tmp_path, str(path))
    assert main([*argv, "--arrangements", "naive,lost-in-the-middle,phase-aware"]) == 0
    doc = json.loads(capsys.readouterr().out)
    for test in doc["paired"]:
        assert test["p_value"] >= 0.05, test
    rows = {row["arrangement"]: row for row in doc["rows"]}
    assert rows["naive"]["total"] == 60
    assert set(r for r, c in enumerate(rows["naive"]["evidence_residues"]) if c) <= good


def test_the_docs_sample_command_prints_the_figures_the_docs_show(
    served, demo_profile, tmp_path, capsys
):
    """docs/compare.md's command on ``examples/questions.jsonl`` (its own flags, the
    defaults it leaves) prints the table and verdict the page shows, line for line."""
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    page = (root / "docs" / "compare.md").read_text(encoding="utf-8")
    command, shown = re.search(
        r"```bash\n(phaseaware compare examples/questions\.jsonl.*?)```\n\n```\n(.*?)```",
        page, re.S,
    ).groups()  # fmt: skip
    argv = command.replace("\\\n", " ").split()[1:]
    server, engine = served
    flags = {"--profile": str(demo_profile), "--base-url": server.base_url,
             "--model": engine.model_name}  # fmt: skip
    argv = [flags.get(prev, arg) for prev, arg in zip(["", *argv[:-1]], argv, strict=True)]
    argv[argv.index("examples/questions.jsonl")] = str(root / "examples" / "questions.jsonl")
    capsys.readouterr()
    assert main([*argv, "--log", str(tmp_path / "docs.jsonl")]) == 0
    printed = capsys.readouterr().out.splitlines()
    lines = [line for line in shown.splitlines() if line.strip() and line.strip() != "..."]
    assert len(lines) >= 9
    for line in lines:
        assert line in printed, f"docs/compare.md shows {line!r}; the command printed:\n" + (
            "\n".join(printed)
        )
