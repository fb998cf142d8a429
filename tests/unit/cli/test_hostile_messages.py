"""Messages that leak or mislead: secrets in any part of a URL, keys an HTTP header cannot
carry (never "cannot reach"), a demo --out that names a file (before the model loads)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from phaseaware.cli.main import main
from phaseaware.redact import redact, redact_url

SECRET = "SeCrEt0123abcXYZ"


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://gw.example/proxy/{SECRET}/v1", "https://gw.example/proxy/***/v1"),
        (f"https://gw.example/v1/{SECRET}/chat/completions",
         "https://gw.example/v1/***/chat/completions"),
        (f"https://gw.example/openai/v1/{SECRET.lower()}", "https://gw.example/openai/v1/***"),
        (f"http://h:8000/v1;key={SECRET}", "http://h:8000/v1;***"),
        (f"http://h:8000/v1;{SECRET}/chat", "http://h:8000/v1;***/chat"),
        (f"http://h:8000/v1#{SECRET}", "http://h:8000/v1#***"),
        (f"http://h:8000/v1/models?api_key={SECRET}&x=1", "http://h:8000/v1/models?api_key=***&x=1"),
        (f"http://u:{SECRET}@h/v1", "http://***@h/v1"),
        ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
        ("https://api.example.com/serving-endpoints/v1/chat/completions",
         "https://api.example.com/serving-endpoints/v1/chat/completions"),
        ("http://h/tokenize", "http://h/tokenize"),
    ],
)  # fmt: skip
def test_redact_url_hides_every_part_that_can_hold_a_secret(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert SECRET not in redact(f"cannot reach {url}.") and SECRET.lower() not in redact(url)


@pytest.mark.parametrize(
    "base_url",
    [f"http://127.0.0.1:9/proxy/{SECRET}/v1", f"http://127.0.0.1:9/v1;{SECRET}",
     f"http://127.0.0.1:9/v1#{SECRET}", f"http://127.0.0.1:9/{SECRET}"],
)  # fmt: skip
def test_calibrate_errors_never_print_url_secrets(
    base_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["calibrate", "--backend", "openai", "--base-url", base_url, "--model", "m",
                 "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
                 "--max-retries", "0", "--context-tokens", "160", "--base-prompts", "1",
                 "--period", "2", "--sweeps", "key", "--out", str(tmp_path / "p.json")])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 1 and "cannot reach the server" in err, err
    assert SECRET not in out + err
    # nothing listens: the run stops before its log (3 s); no file written holds the secret
    for path in tmp_path.rglob("*"):
        assert SECRET not in path.read_text(encoding="utf-8"), path


@pytest.mark.parametrize(
    ("value", "problem"), [("sk-ключ-0123", "a non-ASCII character"), ("sk-abc\ndef", "a newline")]
)
@pytest.mark.parametrize("variable", ["PHASEAWARE_API_KEY", "OPENAI_API_KEY"])
def test_probe_endpoint_names_an_unusable_key_in_the_environment(
    variable: str, value: str, problem: str,
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    monkeypatch.delenv("PHASEAWARE_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv(variable, value)
    code = main(["probe-endpoint", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                 "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
                 "--no-save"])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 1
    assert f"the API key from ${variable} contains {problem}" in err, err
    assert "cannot reach" not in err and "ключ" not in err and "sk-abc" not in err


def test_demo_out_naming_a_file_fails_before_the_model_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    target = tmp_path / "a-file"
    target.write_text("keep me", encoding="utf-8")
    started = time.monotonic()
    code = main(["demo", "--out", str(target)])
    err = capsys.readouterr().err
    assert code == 1
    assert f"--out {target} is a file, not a folder" in err, err
    assert "[1/2]" not in err  # no stage started: the model never loaded
    assert target.read_text(encoding="utf-8") == "keep me"
    assert time.monotonic() - started < 30
