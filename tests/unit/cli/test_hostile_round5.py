"""Hostile input, a fifth pass: new variants against ``score``, ``compare`` and every writer.

Each row is a case that did not hold before its fix: an output of ``score`` or ``compare``
over one of the run's inputs, an eval log that is huge, deep or holds U+2028, a symlink
planted in a shared sticky folder, a malformed server URL, a ``/tokenize`` server that
trickles. Every case runs the real CLI (``main``) and checks one typed line, no
traceback, and that the victim file is unchanged.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from phaseaware.profiles.registry import builtin_profile_dir
from phaseaware.scoring.formats import common
from tests.support.cli_run import run_cli as _run

TOKENIZER = "tiktoken:cl100k_base"
SCORE = ["score", "--format", "jsonl", "--tokenizer", TOKENIZER]


def _sample(i: int, **extra: object) -> dict[str, object]:
    pad = "filler text. " * (3 + i % 11)
    return {"prompt": f"{pad}The key is K{i}x. {pad}", "needle": f"K{i}x", "correct": i % 3 != 0,
            **extra}  # fmt: skip


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    lines = [json.dumps(_sample(i)) for i in range(40)]
    (tmp_path / "eval.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "victim.txt").write_text("precious\n", encoding="utf-8")
    return tmp_path


# --- outputs over inputs ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("log", "flags"),
    [
        ("eval.jsonl", ["--model", "m", "--profile-out", "eval.jsonl"]),
        ("logs", ["--model", "m", "--profile-out", "logs/eval.jsonl"]),  # a file of the folder
        ("linked.jsonl", ["--model", "m", "--profile-out", "eval.jsonl"]),  # its hard link
    ],
)
def test_score_outputs_never_replace_the_eval_log(folder, capsys, log, flags):
    (folder / "logs").mkdir()
    shutil.copy(folder / "eval.jsonl", folder / "logs" / "eval.jsonl")
    os.link(folder / "eval.jsonl", folder / "linked.jsonl")
    before = (folder / "eval.jsonl").read_bytes()
    code, _, err = _run([*SCORE, log, *flags], capsys)
    assert code == 1 and "an input of this run" in err and "choose another --profile-out" in err
    assert (folder / "eval.jsonl").read_bytes() == before
    assert (folder / "logs" / "eval.jsonl").read_bytes() == before


def test_score_checks_its_outputs_before_any_work(folder, capsys):
    code, out, err = _run([*SCORE, "eval.jsonl", "--model", "m", "--profile-out", "."], capsys)
    assert code == 1 and "it is a folder" in err and out == ""


@pytest.fixture()
def compare_folder(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (folder / "round5_backend.py").write_text(
        "def answer(prompt):\n    return '42'\n\ndef grade(answer, answers):\n    return True\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(folder))
    shutil.copy(builtin_profile_dir() / "deepseek-v4-flash-base.json", folder / "prof.json")
    question = {"id": "q0", "question": "what?", "answer": ["42"],
                "chunks": [{"id": "a", "text": "alpha 42", "evidence": ["42"]}]}  # fmt: skip
    (folder / "q.jsonl").write_text(json.dumps(question) + "\n", encoding="utf-8")
    (folder / "key.txt").write_text("sk-secret\n", encoding="utf-8")
    return folder


COMPARE = ["compare", "q.jsonl", "--budget-tokens", "200", "--tokenizer", "deepseek-v4",
           "--chat-format", "deepseek-v4", "--profile", "./prof.json", "--fresh"]  # fmt: skip
CALLABLE = ["--backend", "callable", "--model", "round5_backend:answer"]
OPENAI = ["--backend", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
          "--api-key-file", "key.txt"]  # fmt: skip


@pytest.mark.parametrize(
    ("victim", "flags"),
    [
        ("prof.json", [*CALLABLE, "--log", "prof.json"]),  # the profile it reads
        ("round5_backend.py", [*CALLABLE, "--log", "round5_backend.py"]),  # the callable's module
        (
            "round5_backend.py",
            [*CALLABLE, "--grader", "round5_backend:grade", "--log", "round5_backend.py"],
        ),  # the grader's module  # fmt: skip
        ("key.txt", [*OPENAI, "--log", "key.txt"]),  # the API key file
        ("prof.json", [*CALLABLE, "--log", "c.jsonl", "--plot", "prof.json"]),
    ],
)
def test_compare_outputs_never_replace_its_inputs(compare_folder, capsys, victim, flags):
    if "--plot" in flags:
        pytest.importorskip("matplotlib")
    before = (compare_folder / victim).read_bytes()
    code, _, err = _run([*COMPARE, *flags], capsys)
    assert code == 1 and "an input of this run" in err, err
    assert (compare_folder / victim).read_bytes() == before


# --- score reads logs as streams ------------------------------------------------------


def test_score_streams_lines_and_skips_bad_ones(folder, capsys, monkeypatch):
    """U+2028 inside a prompt is no line break; a line nested too deep or over the line cap
    is one skipped record; nothing else is lost."""
    monkeypatch.setattr(common, "MAX_LINE_BYTES", 1 << 20)
    lines = [json.dumps(_sample(i)) for i in range(30)]
    lines.append(json.dumps(_sample(30, note="a\u2028b"), ensure_ascii=False))
    lines.append("[" * 100_000 + "]" * 100_000)  # JSON nested too deep for json.loads
    lines.append(json.dumps(_sample(31, pad="x" * 1_500_000)))  # over the (patched) line cap
    (folder / "big.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, out, _ = _run([*SCORE, "big.jsonl", "--json"], capsys)
    doc = json.loads(out)
    assert code == 0
    assert sum(row["n"] for row in doc["residues"]) == 31  # 0..30, U+2028 one included
    details = sorted(s["detail"] for s in doc["skipped"])
    assert details == ["JSON nested too deep", "line over 1 MiB"]


def test_score_refuses_a_single_document_over_its_cap(folder, capsys, monkeypatch):
    monkeypatch.setattr(common, "MAX_DOCUMENT_BYTES", 1 << 20)
    (folder / "h.json").write_text(json.dumps({"data": ["x" * 1_500_000]}), encoding="utf-8")
    code, _, err = _run(["score", "--format", "helmet", "--tokenizer", TOKENIZER, "h.json"], capsys)
    assert code == 1 and "is over 1 MiB" in err


# --- links planted in shared folders --------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="chown needs root")
def test_a_planted_symlink_in_a_sticky_folder_is_not_followed(folder, capsys):
    shared = folder / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    link = shared / "p.json"
    link.symlink_to(folder / "victim.txt")
    os.lchown(link, 65534, -1)  # another user's link, as in /tmp
    code, _, err = _run([*SCORE, "eval.jsonl", "--model", "m", "--profile-out", str(link)], capsys)
    assert code == 1 and "is a symlink another user" in err
    assert (folder / "victim.txt").read_text(encoding="utf-8") == "precious\n"


def test_a_symlink_of_ones_own_is_still_followed(folder, capsys):
    shared = folder / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    (shared / "p.json").symlink_to(folder / "out.json")
    code, _, _ = _run([*SCORE, "eval.jsonl", "--model", "m", "--profile-out", "shared/p.json"],
                      capsys)  # fmt: skip
    assert code == 0 and (shared / "p.json").is_symlink()
    assert json.loads((folder / "out.json").read_text(encoding="utf-8"))["model"] == "m"
    assert stat.S_ISREG(os.stat(folder / "out.json").st_mode)


# --- servers: malformed URLs, trickling /tokenize -------------------------------------


@pytest.mark.parametrize("url", ["http://[::1:9/v1", "http://127.0.0.1:0x1/v1"])
def test_a_malformed_server_url_is_a_typed_error(folder, capsys, url):
    pytest.importorskip("openai")
    messages = {"messages": [{"role": "user", "content": "a K1x b"}], "needle": "K1x",
                "correct": True}  # fmt: skip
    (folder / "m.jsonl").write_text(json.dumps(messages) + "\n", encoding="utf-8")
    code, _, err = _run(
        [*SCORE, "m.jsonl", "--chat-format", "chatml", "--server", url, "--model", "m"], capsys
    )
    assert code == 1 and "invalid server URL" in err and "--base-url" in err


@pytest.fixture()
def trickling_server() -> Iterator[str]:
    """A server that answers every request with a head, then one byte a second."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    stop = threading.Event()

    def handle(conn: socket.socket) -> None:
        with conn:
            try:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 100000\r\n\r\n")  # fmt: skip
                while not stop.wait(1.0):
                    conn.sendall(b" ")
            except OSError:
                pass

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            threading.Thread(target=handle, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    stop.set()
    thread.join()
    server.close()


def test_score_timeout_bounds_a_trickling_tokenize(folder, capsys, trickling_server):
    pytest.importorskip("openai")
    messages = {"messages": [{"role": "user", "content": "a K1x b"}], "needle": "K1x",
                "correct": True}  # fmt: skip
    (folder / "m.jsonl").write_text(json.dumps(messages) + "\n", encoding="utf-8")
    start = time.monotonic()
    code, _, err = _run(
        [*SCORE, "m.jsonl", "--chat-format", "chatml", "--server", trickling_server,
         "--model", "m", "--timeout", "1"],
        capsys,
    )  # fmt: skip
    assert code == 1 and "/tokenize" in err
    assert time.monotonic() - start < 20  # 3 attempts of 1 s (the default is 30 s each)


def test_emit_lm_eval_task_checks_both_files_before_writing_either(folder, capsys):
    """A FIFO where the YAML goes: refused, and the JSONL beside it is not written either."""
    (folder / "task").mkdir()
    os.mkfifo(folder / "task" / "phaseaware_phase_sweep.yaml")
    code, _, err = _run(
        ["calibrate", "--backend", "callable", "--model", "round5_unused:answer", "--tokenizer",
         TOKENIZER, "--chat-format", "chatml", "--context-tokens", "160", "--base-prompts", "1",
         "--period", "2", "--emit-lm-eval-task", "task"],
        capsys,
    )  # fmt: skip
    assert code == 1 and "FIFO" in err
    assert sorted(p.name for p in (folder / "task").iterdir()) == ["phaseaware_phase_sweep.yaml"]
