"""A corpus of bad inputs: the CLI answers each with exit 1 or 2 and one line, no traceback.

Most cases run ``main([...])`` in-process (fast); a few run ``python -m phaseaware``
(closed pipe, FIFO, ``/dev/zero``) because they need a real process.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.cli.main import main

ROOT = Path(__file__).resolve().parents[3]
REQUEST = ROOT / "examples" / "request.json"
BIG = "1" + "0" * 400  # a 401-digit integer
TRIED: dict[str, int] = {}  # kind -> inputs tried (printed by the last test)


def cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_invalid_report(code: int, out: str, err: str, *, kind: str) -> None:
    """``profile validate`` lists every problem on stdout by design, then exits 1."""
    TRIED[kind] = TRIED.get(kind, 0) + 1
    assert code == 1 and "Traceback" not in err + out and out.startswith("invalid: "), out + err


def assert_one_line(code: int, err: str, *, kind: str) -> None:
    TRIED[kind] = TRIED.get(kind, 0) + 1
    assert "Traceback" not in err
    assert code in (1, 2), (code, err)
    lines = [line for line in err.splitlines() if line.strip()]
    if code == 1:
        assert len(lines) == 1 and lines[0].startswith(
            ("phaseaware: error: ", "phaseaware: audit failed: ")
        ), err
    else:  # argparse: usage, then one error line
        assert lines and "error:" in lines[-1], err


def small_request(**overrides: object) -> dict:
    doc = {
        "tokenizer": "tiktoken:cl100k_base",
        "question": "What is the code?",
        "budget_tokens": 200,
        "chunks": [{"id": "a", "text": "The code is 4471.", "score": 1.0}],
    }
    doc.update(overrides)
    return doc


def run_request(capsys, tmp_path: Path, content: str | bytes, kind: str) -> str:
    path = tmp_path / "request.json"
    path.write_bytes(
        content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content
    )
    code, _, err = cli(capsys, ["assemble", str(path), "--json"])
    assert_one_line(code, err, kind=kind)
    return err


# --- the reproductions ---------------------------------------------------------


def test_big_integer_score(capsys, tmp_path) -> None:
    text = json.dumps(small_request()).replace('"score": 1.0', f'"score": {BIG}')
    assert "too large" in run_request(capsys, tmp_path, text, "huge number")
    text = json.dumps(small_request()).replace('"score": 1.0', '"score": 1e400')
    assert "too large" in run_request(capsys, tmp_path, text, "huge number")


def test_lone_surrogate_in_chunk_id(capsys, tmp_path) -> None:
    text = json.dumps(small_request()).replace('"id": "a"', '"id": "\\ud800"')
    assert "surrogate" in run_request(capsys, tmp_path, text, "lone surrogate")


def test_deep_nesting(capsys, tmp_path) -> None:
    text = '{"tokenizer": "x", "chunks": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert "nested deeper" in run_request(capsys, tmp_path, text, "deep nesting")


def test_duplicate_and_unknown_keys(capsys, tmp_path) -> None:
    dup = json.dumps(small_request())[:-1] + ', "budget_tokens": 300}'
    assert "duplicate key 'budget_tokens'" in run_request(capsys, tmp_path, dup, "duplicate key")
    typo = json.dumps(small_request(budget_token=5))
    err = run_request(capsys, tmp_path, typo, "unknown key")
    assert "'budget_token'" in err and "known keys" in err and "messages" in err


def _bad_profile(tmp_path: Path) -> Path:
    doc = json.loads((ROOT / "phaseaware/profiles/builtin/deepseek-v4-flash-base.json").read_text())
    text = json.dumps(doc).replace('"period": 8', f'"period": {BIG}', 1)
    path = tmp_path / "profiles" / "huge.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_big_integer_profile(capsys, tmp_path, monkeypatch) -> None:
    path = _bad_profile(tmp_path)
    code, out, err = cli(capsys, ["profile", "validate", str(path)])
    assert_invalid_report(code, out, err, kind="huge number")
    assert "too large" in out
    code, _, err = cli(capsys, ["profile", "show", str(path)])
    assert_one_line(code, err, kind="huge number")
    monkeypatch.setenv("PHASEAWARE_PROFILE_PATH", str(path.parent))
    code, out, err = cli(capsys, ["profile", "list"])
    assert code == 0 and "Traceback" not in err
    assert "huge" in out and "INVALID" in out


def test_symlink_loop_folder_and_missing_profile(capsys, tmp_path) -> None:
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    folder = tmp_path / "folder.json"
    folder.mkdir()
    for target, expected in ((loop, "symlink loop"), (folder, "is a folder")):
        code, out, err = cli(capsys, ["profile", "validate", str(target)])
        assert_invalid_report(code, out, err, kind="profile path")
        assert expected in out, out
        code, _, err = cli(capsys, ["profile", "show", str(target)])
        assert_one_line(code, err, kind="profile path")
        assert expected in err, err
    request = json.dumps(small_request(profile=str(loop)))
    assert "symlink loop" in run_request(capsys, tmp_path, request, "profile path")


def test_calibrate_bad_callable_and_out_folder(capsys, tmp_path) -> None:
    base = ["calibrate", "--backend", "callable", "--tokenizer", "tiktoken:cl100k_base",
            "--chat-format", "none", "--period", "4", "--base-prompts", "1"]  # fmt: skip
    code, _, err = cli(
        capsys, [*base, "--model", "nosuchmod:fn", "--out", str(tmp_path / "p.json")]
    )
    assert_one_line(code, err, kind="calibrate")
    assert "cannot import module 'nosuchmod'" in err
    code, _, err = cli(capsys, [*base, "--model", "json:dumps", "--out", str(tmp_path)])
    assert_one_line(code, err, kind="calibrate")
    assert "is a folder" in err and not list(tmp_path.glob("*.jsonl"))  # nothing ran


def test_audit_exits_1_when_evidence_is_missing(capsys, tmp_path) -> None:
    prompt = tmp_path / "p.txt"
    prompt.write_text("The code is 4471.", encoding="utf-8")
    argv = ["audit", str(prompt), "--tokenizer", "tiktoken:cl100k_base", "--profile",
            "deepseek-v4-flash-base", "--evidence", "absent"]  # fmt: skip
    code, _, err = cli(capsys, argv)
    assert_one_line(code, err, kind="audit")
    assert "FingerprintMismatch" not in err and "measured with tokenizer 'deepseek-v4'" in err
    code, out, err = cli(capsys, [*argv, "--allow-tokenizer-mismatch"])
    assert_one_line(code, err, kind="audit")
    assert "NOT FOUND" in out and "evidence not found" in err


def test_secrets_are_redacted(capsys) -> None:
    argv = ["calibrate", "--backend", "openai", "--tokenizer", "tiktoken:cl100k_base",
            "--model", "m", "--base-url", "ftp://alice:s3cret@example.invalid/v1",
            "--api-key", "sk-abcdefghijklmnop"]  # fmt: skip
    code, _, err = cli(capsys, argv)
    assert "s3cret" not in err and "sk-abcdefghijklmnop" not in err
    assert "visible to other users" in err and code == 1
    assert "Traceback" not in err


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    doc=st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
        lambda inner: (
            st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
        ),
        max_leaves=8,
    )
)
def test_arbitrary_json_documents(capsys, tmp_path, doc) -> None:
    run_request(capsys, tmp_path, json.dumps(doc), "arbitrary JSON")


VALUES = (
    st.none()
    | st.booleans()
    | st.integers(-(10**40), 10**40)
    | st.floats()
    | st.text(max_size=8)
    | st.lists(st.integers(), max_size=2)
    | st.dictionaries(st.text(max_size=4), st.integers(), max_size=2)
)


@settings(max_examples=80, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    key=st.sampled_from(["tokenizer", "chat_format", "profile", "system", "question", "chunks",
                         "budget_tokens", "options"]),
    value=VALUES,
    chunk_key=st.sampled_from(["text", "score", "id", "evidence"]),
    chunk_value=VALUES,
)  # fmt: skip
def test_request_shaped_documents(capsys, tmp_path, key, value, chunk_key, chunk_value) -> None:
    """A valid request with one top-level value and one chunk field replaced."""
    doc = small_request()
    doc[key] = value
    if key != "chunks":
        doc["chunks"] = [dict(doc["chunks"][0], **{chunk_key: chunk_value})]
    path = tmp_path / "request.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    code, _, err = cli(capsys, ["assemble", str(path), "--json"])
    TRIED["request-shaped JSON"] = TRIED.get("request-shaped JSON", 0) + 1
    if code != 0:  # some replacements are still valid requests
        assert_one_line(code, err, kind="request-shaped JSON (rejected)")


def test_usage_errors_exit_2(capsys) -> None:
    for argv in (["assemble"], ["nosuchcommand"], ["audit", "x"], ["calibrate", "--period", "x"]):
        code, _, err = cli(capsys, argv)
        assert_one_line(code, err, kind="usage")
        assert code == 2


# --- real processes ------------------------------------------------------------------


def _python(*args: str, **kw: object) -> subprocess.CompletedProcess[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "phaseaware", *args], env=env, timeout=120, **kw)  # type: ignore[call-overload]


def test_closed_pipe_exits_quietly() -> None:
    argv = [sys.executable, "-m", "phaseaware", "assemble", str(REQUEST), "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.run(
        f"{' '.join(argv)} | head -c 10", shell=True, env=env, capture_output=True, timeout=120
    )
    assert len(proc.stdout) == 10 and b"Traceback" not in proc.stderr and proc.stderr == b""
    TRIED["closed pipe"] = TRIED.get("closed pipe", 0) + 1


def test_fifo_and_dev_zero_are_refused(tmp_path) -> None:
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    for target in (str(fifo), "/dev/zero"):
        for args in (
            ["profile", "validate", target],
            ["audit", target, "--tokenizer", "tiktoken:cl100k_base", "--profile",
             "deepseek-v4-flash-base", "--evidence", "x"],
            ["assemble", target],
        ):  # fmt: skip
            proc = _python(*args, capture_output=True)
            err, out = proc.stderr.decode(), proc.stdout.decode()
            assert proc.returncode == 1 and "Traceback" not in err + out, err
            if args[0] == "profile":
                assert "not a regular file" in out and out.startswith("invalid: ")
            else:
                assert "not a regular file" in err and len(err.strip().splitlines()) == 1
            TRIED["FIFO / device"] = TRIED.get("FIFO / device", 0) + 1


def test_zz_print_counts() -> None:
    """The corpus size by kind (for the README's reliability table; run with -s)."""
    print("\nbad inputs tried:", json.dumps(TRIED, sort_keys=True))
    if len(TRIED) < 10:
        pytest.skip("run the whole file to count the corpus")
    assert sum(TRIED.values()) > 100


def test_assemble_refuses_a_foreign_tokenizer_unless_opted_in(capsys, tmp_path) -> None:
    doc = small_request(profile="deepseek-v4-flash-base")
    doc["chunks"][0]["text"] = "The code is 4471. <|endoftext|>"
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    code, _, err = cli(capsys, ["assemble", str(path)])
    assert_one_line(code, err, kind="tokenizer mismatch")
    assert "measured with tokenizer 'deepseek-v4'" in err
    code, out, err = cli(capsys, ["assemble", str(path), "--json", "--allow-tokenizer-mismatch"])
    result = json.loads(out)
    assert code == 0 and result["tokenizer_mismatch_allowed"] is True
    assert result["neutralized"] == [{"where": "chunk a", "offset": 18, "text": "<|endoftext|>"}]
    code, out, _ = cli(capsys, ["assemble", str(path), "--allow-tokenizer-mismatch"])
    assert "neutralised control token '<|endoftext|>' in chunk a at char 18" in out
