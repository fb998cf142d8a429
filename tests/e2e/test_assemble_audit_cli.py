"""CLI: ``phaseaware assemble`` on the example request, and ``audit`` agreeing with it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from phaseaware.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
REQUEST = ROOT / "examples" / "request.json"
WEAK = {3, 7}  # weak residues of deepseek-v4-flash-base


def run_main(capsys, argv: list[str]) -> tuple[int, str, str]:
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def assembled() -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "phaseaware", "assemble", str(REQUEST), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_assemble_json_keys_and_placement(assembled) -> None:
    for key in (
        "prompt", "messages", "token_count", "placements", "padding_tokens", "dropped",
        "expected_accuracy", "naive_expected_accuracy",
    ):  # fmt: skip
        assert key in assembled
    request = json.loads(REQUEST.read_text(encoding="utf-8"))
    assert len(assembled["placements"]) == len(request["chunks"])
    assert assembled["token_count"] <= request["budget_tokens"]
    assert assembled["expected_accuracy"] > assembled["naive_expected_accuracy"]
    for p in assembled["placements"]:
        assert {"chunk_id", "key_token_positions", "key_char_offsets", "residues"} <= set(p)
        assert "expected_accuracy" in p
        for t, r in zip(p["key_token_positions"], p["residues"], strict=True):
            assert t % 8 == r
            assert r not in WEAK or assembled["token_count"] - t <= 128  # raw local window


def test_in_process_matches_subprocess(capsys, assembled) -> None:
    code, out, _ = run_main(capsys, ["assemble", str(REQUEST), "--json"])
    assert code == 0
    assert json.loads(out) == assembled


def test_text_report(capsys) -> None:
    code, out, _ = run_main(capsys, ["assemble", str(REQUEST)])
    assert code == 0
    assert "kb-recall-notice" in out and "expected accuracy: naive" in out


def test_audit_agrees_with_assembly(capsys, tmp_path, assembled) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(assembled["prompt"], encoding="utf-8")
    request = json.loads(REQUEST.read_text(encoding="utf-8"))
    evidence = {c["id"]: c["evidence"][0] for c in request["chunks"]}
    argv = ["audit", str(prompt), "--tokenizer", "deepseek-v4", "--profile",
            "deepseek-v4-flash-base", "--json"]  # fmt: skip
    for text in evidence.values():
        argv += ["--evidence", text]
    argv += ["--evidence", "text that is not in the prompt"]
    code, out, err = run_main(capsys, argv)
    assert code == 1  # evidence not found: reported, and the exit says so
    assert "evidence not found" in err and len(err.strip().splitlines()) == 1
    audit = json.loads(out)
    assert audit["token_count"] == assembled["token_count"]
    by_text = {e["text"]: e for e in audit["evidence"]}
    assert by_text["text that is not in the prompt"]["found"] is False
    for p in assembled["placements"]:
        occurrences = by_text[evidence[p["chunk_id"]]]["occurrences"]
        audited = {o["char_offset"]: o for o in occurrences}
        for t, c, r in zip(
            p["key_token_positions"], p["key_char_offsets"], p["residues"], strict=True
        ):
            assert audited[c]["token_position"] == t and audited[c]["residue"] == r


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe{}", "not valid UTF-8"),
        (b'{"tokenizer": "tiktoken:cl100k_base", "question": "q", "chunks": []}',
         "missing key 'budget_tokens'"),
        (b'{"tokenizer": "tiktoken:cl100k_base", "question": "q", "budget_tokens": 100, '
         b'"chunks": [{"id": "a"}]}', "chunks[0] is missing key 'text'"),
        (b'{"tokenizer": "tiktoken:cl100k_base", "question": "q", "budget_tokens": 100, '
         b'"chunks": []}', "chunks is empty"),
    ],
)  # fmt: skip
def test_bad_requests(capsys, tmp_path, content, expected) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    code, _, err = run_main(capsys, ["assemble", str(path)])
    assert code == 1
    assert expected in err and err.startswith("phaseaware: error:")
    if "chunks is empty" not in expected:
        assert "examples/request.json" in err


def test_audit_template_wraps_raw_text(capsys, tmp_path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text("The launch code is 4471. Other text follows here.", encoding="utf-8")
    argv = ["audit", str(raw), "--tokenizer", "deepseek-v4", "--profile",
            "deepseek-v4-flash-base", "--evidence", "4471", "--chat-format", "deepseek-v4",
            "--question", "What is the launch code?", "--json"]  # fmt: skip
    code, out, _ = run_main(capsys, argv)
    assert code == 0
    occ = json.loads(out)["evidence"][0]["occurrences"][0]
    # BOS and <｜User｜> come first: "4471" is not at the same token as in the raw text
    assert occ["token_position"] >= 2


def test_the_removed_template_names_are_refused_with_their_replacement(capsys, tmp_path) -> None:
    raw = tmp_path / "raw.txt"
    raw.write_text("The launch code is 4471. Other text follows here.", encoding="utf-8")
    base = ["audit", str(raw), "--tokenizer", "deepseek-v4", "--profile",
            "deepseek-v4-flash-base", "--evidence", "4471", "--json"]  # fmt: skip
    with pytest.raises(SystemExit) as info:  # --template was renamed --chat-format
        run_main(capsys, [*base, "--template", "deepseek-v4"])
    assert info.value.code == 2 and "--template" in capsys.readouterr().err
    request = json.loads(REQUEST.read_text())
    request["template"] = request.pop("chat_format", "none")
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    code, out, err = run_main(capsys, ["assemble", str(path)])
    assert code == 1 and out == ""
    assert "unknown key 'template' (did you mean 'chat_format'?)" in err


def test_text_report_without_a_profile_says_what_its_figures_assume(capsys, tmp_path) -> None:
    request = json.loads(REQUEST.read_text())
    request.pop("profile")
    path = tmp_path / "request.json"
    path.write_text(json.dumps(request))
    code, out, _ = run_main(capsys, ["assemble", str(path)])
    assert code == 0
    assert "profile (none)" in out
    assert "no profile: these figures are a generic lost-in-the-middle heuristic" in out
    code, out, _ = run_main(capsys, ["assemble", str(REQUEST)])
    assert "no profile" not in out
