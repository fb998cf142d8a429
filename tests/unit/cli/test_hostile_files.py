"""Files turned against the user: planted lock files, hard-linked logs, outputs over inputs.

Each case runs the real CLI (``main``) with the callable backend, and checks that the
run fails before any probe with a one-line typed error, and that no victim file changed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

from phaseaware.cli.main import main

CALLS: list[str] = []  # prompts the callable backend saw (a probe that ran)


def _answer(prompt: str) -> str:
    CALLS.append(prompt)
    return "0"


CAL = ["calibrate", "--backend", "callable", "--model", "hostile_files_backend:answer",
       "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml", "--context-tokens",
       "160", "--base-prompts", "1", "--period", "2", "--sweeps", "key"]  # fmt: skip


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("hostile_files_backend")
    module.answer = _answer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hostile_files_backend", module)
    CALLS.clear()
    (tmp_path / "victim.txt").write_text("precious\n", encoding="utf-8")
    (tmp_path / "lk").mkdir()
    return tmp_path


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(args)
    err = capsys.readouterr().err
    assert "Traceback" not in err and "this is a bug" not in err
    if code == 1:
        assert err.count("phaseaware: error: ") == 1, err
    return code, err


# --- locks -----------------------------------------------------------------------------


def test_planted_lock_symlink_is_refused(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (folder / "lk" / ".c3.jsonl.lock").symlink_to("../victim.txt")
    code, err = _run([*CAL, "--log", "lk/c3.jsonl", "--out", "lk/p3.json"], capsys)
    assert code == 1
    assert "lock file" in err and "is a symbolic link" in err and "remove the link" in err
    assert (folder / "victim.txt").read_text(encoding="utf-8") == "precious\n"
    assert not CALLS


def test_dangling_lock_symlink_creates_nothing(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (folder / "lk" / ".c3.jsonl.lock").symlink_to("../created-by-the-lock")
    code, err = _run([*CAL, "--log", "lk/c3.jsonl", "--out", "lk/p3.json"], capsys)
    assert code == 1 and "is a symbolic link" in err
    assert not (folder / "created-by-the-lock").exists() and not CALLS


def test_hard_linked_lock_file_is_refused(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.link(folder / "victim.txt", folder / "lk" / ".c3.jsonl.lock")
    code, err = _run([*CAL, "--log", "lk/c3.jsonl", "--out", "lk/p3.json"], capsys)
    assert code == 1 and "has 2 names (a hard link to another file)" in err
    assert (folder / "victim.txt").read_text(encoding="utf-8") == "precious\n"
    assert not CALLS


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs chown")
def test_lock_file_of_another_user_is_refused(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lock = folder / "lk" / ".c3.jsonl.lock"
    lock.write_text("", encoding="utf-8")
    os.chown(lock, 65534, 65534)
    code, err = _run([*CAL, "--log", "lk/c3.jsonl", "--out", "lk/p3.json"], capsys)
    assert code == 1 and "belongs to another user (uid 65534)" in err and not CALLS


def test_lock_in_a_fifo_slot_is_refused(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    os.mkfifo(folder / "lk" / ".c3.jsonl.lock")
    code, err = _run([*CAL, "--log", "lk/c3.jsonl", "--out", "lk/p3.json"], capsys)
    assert code == 1 and "is not a regular file" in err and not CALLS


LOCK_HOLDER = textwrap.dedent(
    """
    import sys, time
    from phaseaware.filelock import hold_lock
    with hold_lock(sys.argv[1], what="calibration log"):
        print("held", flush=True)
        time.sleep(60)
    """
)


def test_hard_linked_logs_share_one_lock(folder: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*CAL, "--log", "c2.jsonl", "--out", "p2.json"]) == 0  # a real log
    capsys.readouterr()
    os.link(folder / "c2.jsonl", folder / "c2b.jsonl")
    before = (folder / "c2.jsonl").read_bytes()
    CALLS.clear()
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(folder / "c2.jsonl")],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        code, err = _run(
            [*CAL, "--base-prompts", "2", "--log", "c2b.jsonl", "--out", "p2b.json"], capsys
        )
        assert code == 1
        assert "calibration log c2b.jsonl is in use by another process under another name" in err
        assert not CALLS and (folder / "c2.jsonl").read_bytes() == before
    finally:
        holder.kill()
        holder.wait()


def test_fresh_log_is_locked_by_inode_too(folder: Path) -> None:
    """A log created (or replaced by --fresh) under the name lock gets its inode locked."""
    from phaseaware.calibration.log import LogHeader, open_log
    from phaseaware.errors import FileBusyError
    from phaseaware.filelock import hold_lock

    header = LogHeader("f" * 20, {}, "t", "fp", "m", "callable", "now", "0")
    with open_log(folder / "a.jsonl", header):
        os.link(folder / "a.jsonl", folder / "b.jsonl")
        failures: list[BaseException] = []

        def other_thread() -> None:
            try:
                with hold_lock(folder / "b.jsonl"):
                    pass
            except FileBusyError as exc:
                failures.append(exc)

        import threading

        worker = threading.Thread(target=other_thread)
        worker.start()
        worker.join()
        assert failures and "in use by another thread" in str(failures[0])
    with hold_lock(folder / "b.jsonl"):  # released with the log
        pass


# --- outputs over inputs ---------------------------------------------------------------

OPENAI = ["calibrate", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
          "--model", "m", "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
          "--max-retries", "0"]  # fmt: skip


def _hf_folder(folder: Path) -> Path:
    from phaseaware.tokenizers.registry import REFERENCE_MODEL_DIR

    tok = folder / "tok"
    tok.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (tok / name).write_bytes((REFERENCE_MODEL_DIR / name).read_bytes())
    (tok / "chat_template.jinja").write_text(
        "{% for m in messages %}{{ m['content'] }}\n{% endfor %}", encoding="utf-8"
    )
    return tok


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--out", "{key}"], "--out {key} is the same file as --api-key-file {key}"),
        (["--log", "{key}"], "--log {key} is the same file as --api-key-file {key}"),
        (["--log", "{keylink}"], "--log {keylink} is the same file as --api-key-file {key}"),
        (["--emit-batch", "{key}"], "--emit-batch {key} is the same file as --api-key-file"),
    ],
    ids=["--out key", "--log key", "--log hard link to key", "--emit-batch key"],
)
def test_outputs_never_replace_the_api_key_file(
    folder: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    key = folder / "key.txt"
    key.write_text("sk-test-0123456789\n", encoding="utf-8")
    os.link(key, folder / "keylink.txt")
    names = {"key": str(key), "keylink": str(folder / "keylink.txt")}
    args = [*OPENAI, "--api-key-file", str(key), *[f.format(**names) for f in flags]]
    if "--out" not in flags:
        args += ["--out", str(folder / "p.json")]
    before = _snapshot(folder)
    code, err = _run(args, capsys)
    assert code == 1 and message.format(**names) in err, err
    assert "sk-test" not in err and _snapshot(folder) == before


@pytest.mark.parametrize(
    "target", ["tokenizer.json", "chat_template.jinja", "tokenizer_config.json"]
)
@pytest.mark.parametrize("flag", ["--out", "--log"])
def test_outputs_never_replace_tokenizer_files(
    folder: Path, capsys: pytest.CaptureFixture[str], target: str, flag: str
) -> None:
    tok = _hf_folder(folder)
    other = "--log" if flag == "--out" else "--out"
    args = [*CAL[:5], "--tokenizer", f"hf:{tok}", *CAL[7:], "--chat-format", "hf",
            flag, str(tok / target), other, str(folder / "other.x")]  # fmt: skip
    before = _snapshot(folder)
    code, err = _run(args, capsys)
    assert code == 1, err
    assert f"{flag} {tok / target} is the same file as the tokenizer file {tok / target}" in err
    assert _snapshot(folder) == before and not CALLS


def test_outputs_never_replace_the_callables_module(
    folder: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = folder / "my_probe_backend.py"
    source.write_text("def answer(prompt):\n    return '0'\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, "my_probe_backend", raising=False)
    args = [*CAL, "--model", "my_probe_backend:answer", "--log", "./my_probe_backend.py"]
    before = _snapshot(folder)
    code, err = _run(args, capsys)
    assert code == 1
    assert "--log my_probe_backend.py is the same file as the callable's module" in err, err
    assert _snapshot(folder) == before


def test_outputs_never_replace_the_reference_model(
    folder: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("torch")
    from phaseaware.tokenizers.registry import REFERENCE_MODEL_DIR

    target = REFERENCE_MODEL_DIR / "tokenizer.json"
    before = target.read_bytes()
    code, err = _run(["calibrate", "--out", str(target)], capsys)
    assert code == 1 and "is the same file as the tokenizer file" in err, err
    assert target.read_bytes() == before


# --- request sizes -----------------------------------------------------------------------


def test_a_million_tiny_chunks_are_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    root = Path(__file__).resolve().parents[3]
    doc = json.loads((root / "examples" / "request.json").read_text(encoding="utf-8"))
    doc.update(tokenizer="tiktoken:cl100k_base", profile=None, chunks=[{"text": "a"}] * 1_000_001)
    path = tmp_path / "many.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    code, err = _run(["assemble", str(path)], capsys)
    assert code == 1
    assert "chunks must be a list of length <= 100000, got a list of 1000001 items" in err


def test_the_python_api_bounds_the_chunk_count(cl100k) -> None:
    from phaseaware import assemble
    from phaseaware.errors import InputError

    with pytest.raises(InputError, match="chunks holds 100001 chunks; at most 100000"):
        assemble(["a"] * 100_001, tokenizer=cl100k, chat_format="none", question="q",
                 budget_tokens=100)  # fmt: skip


# --- a full disk -------------------------------------------------------------------------

FULL_DISK = textwrap.dedent(
    """
    import resource, signal, sys
    sys.path.insert(0, sys.argv[1])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail (EFBIG)
    resource.setrlimit(resource.RLIMIT_FSIZE, (1000, 1000))  # the header and a line or two
    from phaseaware.cli.main import main
    sys.exit(main(sys.argv[2:]))
    """
)


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX resource limits")
def test_a_full_disk_during_calibrate_names_the_log_and_resumes(tmp_path: Path) -> None:
    (tmp_path / "disk_backend.py").write_text("def answer(p):\n    return '0'\n", "utf-8")
    args = [*CAL, "--model", "disk_backend:answer", "--base-prompts", "3",
            "--log", "c.jsonl", "--out", "p.json"]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    full = subprocess.run(
        [sys.executable, "-c", FULL_DISK, str(tmp_path), *args],
        cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert full.returncode == 1, full.stderr
    assert "phaseaware: error: cannot append to calibration log c.jsonl: File too large" in (
        full.stderr
    )
    assert "run the same command again to resume" in full.stderr
    assert "Traceback" not in full.stderr and "this is a bug" not in full.stderr
    kept = (tmp_path / "c.jsonl").read_text(encoding="utf-8").count("\n")
    again = subprocess.run(
        [sys.executable, "-c", FULL_DISK.replace("(1000, 1000)", "(resource.RLIM_INFINITY,) * 2"), str(tmp_path),
         *args], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert kept == 2  # the header and the one probe that fit (then a torn line)
    assert (tmp_path / "c.jsonl").read_text(encoding="utf-8").count("\n") == 7  # header + 6


def test_probe_endpoint_record_never_replaces_the_key_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from phaseaware.endpoints.record import record_path

    monkeypatch.setenv("PHASEAWARE_HOME", str(tmp_path / "home"))
    key = record_path("http://127.0.0.1:9/v1", "m")
    key.parent.mkdir(parents=True)
    key.write_text("sk-test-0123456789\n", encoding="utf-8")
    code, err = _run(["probe-endpoint", "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                      "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
                      "--api-key-file", str(key)], capsys)  # fmt: skip
    assert (
        code == 1 and "the endpoint record" in err and "is the same file as --api-key-file" in err
    )
    assert key.read_text(encoding="utf-8") == "sk-test-0123456789\n"
