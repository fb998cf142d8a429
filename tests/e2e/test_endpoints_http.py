"""Endpoint discovery, verification and robust placement over real HTTP on loopback.

Every server is ``tests/support/endpoint_server.py`` on uvicorn, every client the
official ``openai`` client. Hidden prefixes are drawn inside the server's closure
(``random.SystemRandom``), so the test code never knows them: it learns the
offset only from ``probe_endpoint`` and confirms placements from the server's own
tokenization of what it was sent.
"""

from __future__ import annotations

import json
import random
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import openai
import pytest

from phaseaware.assembly import assemble
from phaseaware.assembly.plan.robust import reliable_residues
from phaseaware.cli.main import main
from phaseaware.cli.request import parse_request
from phaseaware.endpoints import (
    TemplateMismatchError,
    check_response,
    complete_tokens,
    probe_endpoint,
)
from phaseaware.errors import FingerprintMismatchError, PhaseawareWarning
from phaseaware.profiles.registry import get_profile
from phaseaware.tokenizers import load_tokenizer
from tests.support.endpoint_server import EndpointApp, Served, start_endpoint

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "request.json"
PERIOD = 8
BOS = "<｜begin▁of▁sentence｜>"


@pytest.fixture(scope="module")
def tok():  # type: ignore[no-untyped-def]
    return load_tokenizer("deepseek-v4")


@pytest.fixture()
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PHASEAWARE_HOME", str(tmp_path))
    for var in ("PHASEAWARE_API_KEY", "OPENAI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return tmp_path


def _secret_prefix(low: int, high: int) -> Callable[[int], str]:
    """A hidden preamble of a length drawn once, kept inside the closure."""
    n = random.SystemRandom().randint(low, high)
    return lambda _i: "System preamble:" + " ." * n


def _varying_prefix(choices: tuple[int, ...]) -> Callable[[int], str]:
    rng = random.Random(random.SystemRandom().getrandbits(64))
    return lambda _i: "Date line:" + " ." * rng.choice(choices)


@pytest.fixture()
def serve(tok) -> Iterator[Callable[..., tuple[str, EndpointApp]]]:  # type: ignore[no-untyped-def]
    servers = []

    def start(**kwargs: object) -> tuple[str, EndpointApp]:
        kwargs.setdefault("tokenizer", tok)
        kwargs.setdefault("chat_format", "deepseek-v4")
        server, app = start_endpoint(**kwargs)
        servers.append(server)
        return server.base_url, app

    yield start
    for server in servers:
        server.close()


def _request_doc(**extra: object) -> dict[str, object]:
    doc = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    doc.update(extra)
    return doc


def _server_residues(served: Served, prompt: str, chars: tuple[int, ...]) -> list[int]:
    """Residues, at the server's own positions, of the tokens holding prompt ``chars``."""
    assert served.text is not None and served.tokens is not None
    shift = len(served.text) - len(prompt)  # the server's text ends with the prompt's body
    assert served.text.endswith(prompt[len(BOS) :])  # BOS + [hidden] + the prompt's body
    return [(served.tokens.token_at_char(c + shift) + served.extra) % PERIOD for c in chars]


def _chat(base_url: str, messages: object) -> object:
    client = openai.OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0)
    return client.chat.completions.create(model="sim-model", messages=messages, max_tokens=1)  # type: ignore[arg-type]


def test_hidden_prefix_is_discovered_and_evidence_lands_on_reliable_residues(
    serve, home: Path, tok
) -> None:  # type: ignore[no-untyped-def]
    base_url, app = serve(hidden_prefix=_secret_prefix(3, 41))
    record = probe_endpoint(
        base_url=base_url, model="sim-model", tokenizer=tok, chat_format="deepseek-v4"
    )
    assert record.mode == "count" and record.stability == "constant"
    doc = _request_doc(endpoint={"base_url": base_url, "model": "sim-model"})
    kwargs = parse_request(doc)
    assert kwargs["options"].position_offset == record.offset
    result = assemble(**kwargs)
    response = _chat(base_url, list(result.messages or ()))
    check = check_response(
        response, planned_tokens=result.token_count, offset=record.offset, on_mismatch="raise"
    )
    assert check is not None and check.ok
    served = app.log[-1]
    reliable = reliable_residues(
        [get_profile("deepseek-v4-flash-base").residue_reliability(r) for r in range(PERIOD)],
        tolerance=0.05,
    )
    for p in result.placements:  # every claimed residue is the server's
        assert _server_residues(served, result.prompt, p.key_char_offsets) == list(p.residues)
    top = max(result.placements, key=lambda p: p.score)
    assert _server_residues(served, result.prompt, top.key_char_offsets)[0] in reliable
    # a chunk with one key can always be padded onto a reliable residue (multi-key chunks
    # trade their keys' residues against each other)
    single = [p for p in result.placements if len(p.key_char_offsets) == 1]
    assert single and all(
        _server_residues(served, result.prompt, p.key_char_offsets)[0] in reliable for p in single
    )


def test_varying_prefix_robust_placement_keeps_a_copy_on_a_reliable_residue(
    serve, home: Path, tok
) -> None:  # type: ignore[no-untyped-def]
    base_url, app = serve(hidden_prefix=_varying_prefix((1, 2, 3)))
    record = probe_endpoint(
        base_url=base_url, model="sim-model", tokenizer=tok, chat_format="deepseek-v4", rounds=4
    )
    assert record.stability == "varying" and len(record.offsets) == 3
    result = assemble(**parse_request(_request_doc(endpoint=str(
        home / "endpoints" / next(p.name for p in (home / "endpoints").iterdir())
    ))))  # fmt: skip
    report = result.robust
    assert report is not None and report.covered == record.offsets
    assert all(p.residues == () for p in result.placements)  # no single residue claimed
    assert report.worst_case_accuracy == min(a for _, a in report.accuracy_by_offset)
    assert report.extra_tokens > 0
    reliable = set(report.reliable_residues)
    chars = tuple(c.key_char_offset for c in report.copies)
    for _ in range(12):
        response = _chat(base_url, list(result.messages or ()))
        check = check_response(
            response, planned_tokens=result.token_count, offsets=record.offsets,
            on_mismatch="raise",
        )  # fmt: skip
        assert check is not None and check.ok
        served = app.log[-1]
        measured = _server_residues(served, result.prompt, chars)
        assert reliable & set(measured), measured
        d = len(served.ids) - result.token_count
        assert measured == [dict(c.residues)[d] for c in report.copies]


def test_tokenize_server_exact_mode_and_bos(serve, home: Path, tok) -> None:  # type: ignore[no-untyped-def]
    base_url, _ = serve(tokenize_route=True)
    record = probe_endpoint(
        base_url=base_url, model="sim-model", tokenizer=tok, chat_format="deepseek-v4",
        mode="exact",
    )  # fmt: skip
    assert (record.mode, record.offset, record.stability) == ("exact", 0, "constant")
    base_url, _ = serve(tokenize_route=True, extra_bos=True)
    record = probe_endpoint(
        base_url=base_url, model="sim-model", tokenizer=tok, chat_format="deepseek-v4"
    )
    assert (record.mode, record.offset) == ("exact", 1)


def test_bos_server_count_mode_offset_one(serve, home: Path, tok) -> None:  # type: ignore[no-untyped-def]
    base_url, _ = serve(extra_bos=True)
    record = probe_endpoint(
        base_url=base_url, model="sim-model", tokenizer=tok, chat_format="deepseek-v4"
    )
    assert (record.mode, record.offset, record.offsets) == ("count", 1, (1,))


def test_one_changed_character_names_the_first_differing_token(serve, home: Path, tok) -> None:  # type: ignore[no-untyped-def]
    base_url, _ = serve(tokenize_route=True, template_edit=("</think>", "</thinK>"))
    with pytest.raises(
        TemplateMismatchError, match=r"at token \d+.*phaseaware has id \d+ '</think>'"
    ):
        probe_endpoint(
            base_url=base_url, model="sim-model", tokenizer=tok, chat_format="deepseek-v4",
            save=False,
        )  # fmt: skip


def test_other_tokenizer_in_count_mode_is_a_typed_error(serve, home: Path, tok) -> None:  # type: ignore[no-untyped-def]
    base_url, _ = serve(tokenizer=load_tokenizer("tiktoken:cl100k_base"), chat_format="chatml")
    with pytest.raises(TemplateMismatchError, match="offsets"):
        probe_endpoint(
            base_url=base_url, model="sim-model", tokenizer=tok, chat_format="chatml", save=False
        )


def test_complete_tokens_sends_the_verified_ids(serve, home: Path, tok) -> None:  # type: ignore[no-untyped-def]
    base_url, app = serve(hidden_prefix=_secret_prefix(3, 9))  # ids bypass the template
    result = assemble(**parse_request(_request_doc()))
    client = openai.OpenAI(base_url=base_url, api_key="EMPTY", max_retries=0)
    response = complete_tokens(client, model="sim-model", result=result, max_tokens=1)
    assert response.usage.prompt_tokens == result.token_count
    assert list(app.log[-1].ids) == tok.encode(result.prompt)


def test_drift_after_the_server_changed_warns_with_the_new_offset(serve, home: Path, tok) -> None:  # type: ignore[no-untyped-def]
    base_url, _ = serve(extra_bos=True)
    result = assemble(**parse_request(_request_doc()))
    response = _chat(base_url, list(result.messages or ()))
    with pytest.warns(PhaseawareWarning, match="position_offset=1"):
        check_response(response, planned_tokens=result.token_count, offset=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_response(response, planned_tokens=result.token_count, offset=1)


def test_cli_probe_json_record_redacts_and_assemble_uses_it(
    serve, home: Path, tok, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:  # type: ignore[no-untyped-def]
    base_url, _ = serve(extra_bos=True)
    key_file = tmp_path / "key.txt"
    key_file.write_text("sk-very-secret-123\n", encoding="utf-8")
    url = base_url.replace("http://", "http://alice:hunter2@")
    argv = ["probe-endpoint", "--base-url", url, "--model", "sim-model", "--tokenizer",
            "deepseek-v4", "--chat-format", "deepseek-v4", "--api-key-file", str(key_file),
            "--json"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out
    doc = json.loads(out)
    assert doc["offset"] == 1 and doc["schema"] == "phaseaware.endpoint/v1"
    files = list((home / "endpoints").iterdir())
    assert len(files) == 1
    stored = files[0].read_text(encoding="utf-8")
    for secret in ("sk-very-secret-123", "hunter2", "alice"):
        assert secret not in stored and secret not in out
    request = tmp_path / "request.json"
    request.write_text(json.dumps(_request_doc(endpoint=str(files[0]))), encoding="utf-8")
    assert main(["assemble", str(request), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["position_offset"] == 1
    doc["tokenizer_fingerprint"] = "sha256:" + "0" * 64
    files[0].write_text(json.dumps(doc), encoding="utf-8")
    assert main(["assemble", str(request)]) == 1
    assert "probed with tokenizer" in capsys.readouterr().err
    with pytest.raises(FingerprintMismatchError):
        parse_request(_request_doc(endpoint=str(files[0])))
