"""Issue 25 (hostile input, round 3), items 1, 3, 4 and 5: every reproduction as a case.

CLI cases are ONE table of (args, environment, expected exit code, expected message);
placeholders in the args name files the fixture makes: ``{tmp}`` the test folder,
``{log}`` a real calibration log, ``{req}`` the example request, ``{fifo}`` a FIFO,
``{link}`` a hard link to the log, ``{shadow}`` a folder holding a profile named like
a built-in. Cases that need more than one command (locks, data kept) follow the table.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from phaseaware.calibration.backends.callable import CallableBackend
from phaseaware.calibration.probes import ProbeSettings
from phaseaware.calibration.runner import calibrate
from phaseaware.chat.layout import conversation_layout
from phaseaware.cli.main import main
from phaseaware.cli.request_schema import Request, RequestOptions
from phaseaware.profiles.registry import builtin_profile_dir
from phaseaware.tokenizers import load_tokenizer
from tests.support.optional import require

ROOT = Path(__file__).resolve().parents[3]
BUILTIN = builtin_profile_dir() / "deepseek-v4-flash-base.json"
CALLS: list[str] = []  # prompts the callable backend saw (a probe that ran)


def _answer(prompt: str) -> str:
    CALLS.append(prompt)
    return "0"


@pytest.fixture(scope="module")
def real_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small, real calibration log (callable backend, cl100k, 2 offsets x 2 prompts)."""
    folder = tmp_path_factory.mktemp("log")
    tok = load_tokenizer("tiktoken:cl100k_base")
    calibrate(
        backend=CallableBackend(lambda prompt: "0"),
        tokenizer=tok,
        layout=conversation_layout(tokenizer=tok, chat_format="chatml"),
        settings=ProbeSettings(context_tokens=160, n_offsets=2, base_prompts=2, sweeps=("key",)),
        model="toy",
        chat_format="chatml",
        log_path=folder / "x.jsonl",
        period=2,
    )
    return folder / "x.jsonl"


def _request(**options: object) -> dict:
    doc = json.loads((ROOT / "examples" / "request.json").read_text(encoding="utf-8"))
    doc["tokenizer"] = "tiktoken:cl100k_base"
    doc["profile"] = None
    doc["options"] = options
    return doc


def _profile(**changes: object) -> dict:
    doc = json.loads(BUILTIN.read_text(encoding="utf-8"))
    doc.update(changes)
    return doc


@pytest.fixture()
def files(tmp_path: Path, real_log: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.chdir(tmp_path)
    module = types.ModuleType("hostile_backend")
    module.answer = _answer  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "hostile_backend", module)
    CALLS.clear()
    log = tmp_path / "x.jsonl"
    log.write_bytes(real_log.read_bytes())
    os.link(log, tmp_path / "hardlink.jsonl")
    os.mkfifo(tmp_path / "fifo")
    requests = {
        "thinking_str": _request(thinking="false"),
        "thinking_no": _request(thinking="no"),
        "thinking_int": _request(thinking=1),
        "offset_huge": _request(position_offset=10**29),
        "options_zero": {**_request(), "options": 0},
        "options_false": {**_request(), "options": False},
        "options_list": {**_request(), "options": []},
    }
    typo = _request()
    typo["chunks"][0] = {"id": "a", "text": "t", "scroe": 0.91, "evidance": ["t"]}
    requests["typo"] = typo
    for name, doc in requests.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")
    profiles = {
        "window_huge": _profile(local_window=10**25),
        "window_context": _profile(local_window=5000, context_tokens=4096),
        "zero_trials": _profile(n=[0] * 8),
        "unknown_key": _profile(local_windw=128),
    }
    for name, doc in profiles.items():
        (tmp_path / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")
    shadow = tmp_path / "shadow"
    shadow.mkdir()
    (shadow / BUILTIN.name).write_text(json.dumps(_profile()), encoding="utf-8")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / BUILTIN.name).write_text(json.dumps(_profile()), encoding="utf-8")
    shared.chmod(0o777)  # world-writable, no sticky bit: anyone could replace the file
    (tmp_path / "key-nl").write_text("sk-abc\ndef", encoding="utf-8")
    (tmp_path / "key-utf").write_text("sk-ключ", encoding="utf-8")
    return {
        "tmp": str(tmp_path),
        "log": str(log),
        "link": str(tmp_path / "hardlink.jsonl"),
        "fifo": str(tmp_path / "fifo"),
        "shadow": str(shadow),
        "shared": str(shared),
    }


CAL = ["calibrate", "--backend", "callable", "--model", "hostile_backend:answer",
       "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml", "--context-tokens",
       "160", "--base-prompts", "1", "--period", "2", "--sweeps", "key"]  # fmt: skip
OPENAI = ["calibrate", "--backend", "openai", "--base-url", "http://127.0.0.1:9/v1",
          "--model", "m", "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
          "--out", "{tmp}/o.json"]  # fmt: skip
PLAN = ["calibrate", "--plan", "--sweeps", "key"]
AUDIT = ["audit", "--tokenizer", "tiktoken:cl100k_base", "--profile", "deepseek-v4-flash-base",
         "--evidence", "x", "--chat-format", "chatml", "{tmp}/x.jsonl"]  # fmt: skip

# (id, args, environment, exit code, message on stderr (or stdout for `profile validate`))
CASES = [
    # item 1: output paths that destroy data
    ("build -o /dev/null", ["profile", "build", "{log}", "-o", "/dev/null"], {}, 1,
     "cannot write /dev/null: it is a character device, not a regular file"),
    ("build -o /dev/full", ["profile", "build", "{log}", "-o", "/dev/full"], {}, 1,
     "cannot write /dev/full: it is a character device"),
    ("build -o FIFO", ["profile", "build", "{log}", "-o", "{fifo}"], {}, 1,
     "it is a FIFO (named pipe), not a regular file"),
    ("build -o the log", ["profile", "build", "{log}", "-o", "{log}"], {}, 1,
     "is the same file as the calibration log"),
    ("build -o ./the log", ["profile", "build", "{log}", "-o", "./x.jsonl"], {}, 1,
     "is the same file as the calibration log"),
    ("build -o hard link", ["profile", "build", "{log}", "-o", "{link}"], {}, 1,
     "is the same file as the calibration log"),
    ("calibrate --log x --out x", [*CAL, "--log", "{tmp}/y.jsonl", "--out", "{tmp}/y.jsonl"],
     {}, 1, "--out {tmp}/y.jsonl is the same file as --log {tmp}/y.jsonl"),
    ("calibrate --out /dev/null", [*CAL, "--out", "/dev/null"], {}, 1,
     "cannot write /dev/null: it is a character device"),
    ("calibrate --plot = --out", [*CAL, "--out", "{tmp}/p.json", "--plot", "{tmp}/p.json"], {},
     1, "--out {tmp}/p.json is the same file as --plot"),
    ("calibrate --emit-batch the log", [*CAL, "--log", "{log}", "--emit-batch", "{log}"], {},
     1, "is the same file as --emit-batch"),
    # item 3: request files (the Python API's options: test_options_range_checked)
    ('"thinking": "false"', ["assemble", "{tmp}/thinking_str.json"], {}, 1,
     "options.thinking must be true or false (a JSON boolean), got 'false'"),
    ('"thinking": "no"', ["assemble", "{tmp}/thinking_no.json"], {}, 1,
     "options.thinking must be true or false (a JSON boolean), got 'no'"),
    ('"thinking": 1', ["assemble", "{tmp}/thinking_int.json"], {}, 1,
     "options.thinking must be true or false (a JSON boolean), got 1"),
    ("misspelled chunk keys", ["assemble", "{tmp}/typo.json"], {}, 1,
     "unknown key 'scroe' in chunks[0] (did you mean 'score'?)"),
    ('"options": 0', ["assemble", "{tmp}/options_zero.json"], {}, 1,
     "options must be an object or null, got 0"),
    ('"options": false', ["assemble", "{tmp}/options_false.json"], {}, 1,
     "options must be an object or null, got False"),
    ('"options": []', ["assemble", "{tmp}/options_list.json"], {}, 1,
     "options must be an object or null, got []"),
    ("position_offset 10**29", ["assemble", "{tmp}/offset_huge.json"], {}, 1,
     "options.position_offset must be an integer <= 1000000, got an integer of 30 digits"),
    # item 4: guards that switch themselves off
    ("--fail-under nan", [*AUDIT, "--fail-under", "nan"], {}, 2,
     "argument --fail-under: expected a finite number in [0, 1], got 'nan'"),
    ("--fail-under -1", [*AUDIT, "--fail-under", "-1"], {}, 2,
     "argument --fail-under: expected a number in [0, 1], got '-1'"),
    ("--fail-under inf", [*AUDIT, "--fail-under", "inf"], {}, 2,
     "expected a finite number in [0, 1], got 'inf'"),
    ("--fail-under 2", [*AUDIT, "--fail-under", "2"], {}, 2,
     "expected a number in [0, 1], got '2'"),
    ("--context-tokens -1", [*PLAN, "--context-tokens", "-1"], {}, 2,
     "argument --context-tokens: expected an integer in [16, 100000000], got '-1'"),
    ("--price-per-million -1", [*PLAN, "--price-per-million", "-1"], {}, 2,
     "argument --price-per-million: expected a number in [0, 1e+06], got '-1'"),
    ("--price-per-million nan", [*PLAN, "--price-per-million", "nan"], {}, 2,
     "expected a finite number in [0, 1e+06], got 'nan'"),
    ("--period 1e20", [*PLAN, "--period", "1e20"], {}, 2,
     "argument --period: expected an integer in [1, 512] or 'auto', got '1e20'"),
    ("--period 10**20", [*PLAN, "--period", str(10**20)], {}, 2,
     "argument --period: expected an integer in [1, 512]"),
    ("--timeout nan", [*OPENAI, "--timeout", "nan"], {}, 2,
     "argument --timeout: expected a finite number in (0, 86400], got 'nan'"),
    ("--timeout inf", [*OPENAI, "--timeout", "inf"], {}, 2,
     "argument --timeout: expected a finite number in (0, 86400], got 'inf'"),
    ("--timeout 0", [*OPENAI, "--timeout", "0"], {}, 2,
     "argument --timeout: expected a number in (0, 86400], got '0'"),
    ("--prompt-token-offset 10**20", [*OPENAI, "--prompt-token-offset", str(10**20)], {}, 1,
     "--prompt-token-offset must be at most 1000000 tokens"),
    ("--local-window 10**14", [*CAL, "--local-window", str(10**14)], {}, 1,
     "--local-window must be in [1, 100000000] tokens"),
    ("--local-window > --context-tokens", [*CAL, "--local-window", "500"], {}, 1,
     "--local-window 500 is longer than --context-tokens 160"),
    # item 5: profiles trusted too easily
    ("local_window 10**25", ["profile", "validate", "{tmp}/window_huge.json"], {}, 1,
     "local_window: an integer of 26 digits is above 100000000 tokens"),
    ("local_window > context", ["profile", "validate", "{tmp}/window_context.json"], {}, 1,
     "local_window: 5000 tokens is longer than the 4096-token prompts"),
    ("0 trials, accuracy 0.x", ["profile", "validate", "{tmp}/zero_trials.json"], {}, 1,
     "n[0] is 0 trials but residue_accuracy[0] is 0.4375"),
    ("unknown profile key", ["profile", "validate", "{tmp}/unknown_key.json"], {}, 1,
     "unknown key 'local_windw' (did you mean 'local_window'?)"),
    ("unknown key used", ["profile", "show", "{tmp}/unknown_key.json"], {}, 1,
     "unknown key 'local_windw'"),
    ("shadowing a built-in", ["profile", "show", "deepseek-v4-flash-base"],
     {"PHASEAWARE_PROFILE_PATH": "{shadow}"}, 0,
     "phaseaware: warning: profile 'deepseek-v4-flash-base' from $PHASEAWARE_PROFILE_PATH"),
    ("world-writable folder", ["profile", "show", "deepseek-v4-flash-base"],
     {"PHASEAWARE_PROFILE_PATH": "{shared}"}, 1, "which other users can write to (mode 777)"),
    ("world-writable, --trust-profiles",
     ["profile", "show", "deepseek-v4-flash-base", "--trust-profiles"],
     {"PHASEAWARE_PROFILE_PATH": "{shared}"}, 0, "shadows the built-in profile of that name"),
    ("world-writable, env trust", ["profile", "show", "deepseek-v4-flash-base"],
     {"PHASEAWARE_PROFILE_PATH": "{shared}", "PHASEAWARE_TRUST_PROFILES": "1"}, 0,
     "shadows the built-in profile of that name"),
    # item 6 (deliver 5): errors that say what happened
    ("build -o missing folder", ["profile", "build", "{log}", "-o", "{tmp}/nope/p.json"], {}, 1,
     "cannot write {tmp}/nope/p.json: folder {tmp}/nope does not exist; create it first"),
    ("build -o a folder", ["profile", "build", "{log}", "-o", "{tmp}"], {}, 1,
     "cannot write {tmp}: it is a folder; name a file inside it"),
    ("build -o /proc/...", ["profile", "build", "{log}", "-o", "/proc/phaseaware.json"], {}, 1,
     "cannot write /proc/phaseaware.json: "),
    ("OPENAI_API_KEY with newline", OPENAI, {"OPENAI_API_KEY": "sk-abc123\n"}, 1,
     "the API key from $OPENAI_API_KEY contains a newline, which an HTTP header cannot carry"),
    ("PHASEAWARE_API_KEY non-ASCII", OPENAI, {"PHASEAWARE_API_KEY": "sk-ключ"}, 1,
     "the API key from $PHASEAWARE_API_KEY contains a non-ASCII character"),
    ("--api-key-file newline inside", [*OPENAI, "--api-key-file", "{tmp}/key-nl"], {}, 1,
     "the API key from --api-key-file {tmp}/key-nl contains a newline"),
    ("--api-key-file non-ASCII", [*OPENAI, "--api-key-file", "{tmp}/key-utf"], {}, 1,
     "contains a non-ASCII character"),
    ("probe-endpoint --api-key-file", ["probe-endpoint", "--base-url", "http://127.0.0.1:9/v1",
     "--model", "m", "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
     "--api-key-file", "{tmp}/key-nl"], {}, 1,
     "the API key from --api-key-file {tmp}/key-nl contains a newline"),
    ("--api-key with newline", [*OPENAI, "--api-key", "sk-abc\n"], {}, 1,
     "the API key from --api-key contains a newline"),
    ("server key with newline", ["serve-reference", "--port", "0"],
     {"PHASEAWARE_SERVER_API_KEY": "secret-value\n"}, 1,
     "the API key from $PHASEAWARE_SERVER_API_KEY contains a newline"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("args", "env", "code", "message"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_cli_case(
    files: dict[str, str],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    env: dict[str, str],
    code: int,
    message: str,
) -> None:
    if args[0] == "serve-reference":
        require("torch")  # without it the command stops at the missing extra first
    monkeypatch.delenv("PHASEAWARE_TRUST_PROFILES", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value.format(**files))
    before = Path(files["log"]).read_bytes()
    try:
        got = main([arg.format(**files) for arg in args])
    except SystemExit as exc:  # argparse usage errors
        got = int(exc.code or 0)
    out, err = capsys.readouterr()
    shown = out + err
    print(f"exit {got}: {shown.strip()}")  # shown with `pytest -rP` (the report's list)
    assert got == code, shown
    assert message.format(**files) in shown, shown
    assert "Traceback" not in shown and "this is a bug" not in shown
    for secret in ("sk-abc", "ключ", "secret-value"):  # keys are never echoed
        assert secret not in shown
    if code == 1 and not out.startswith("invalid: "):  # `profile validate` reports on stdout
        assert err.count("phaseaware: error: ") == 1, err
        assert [line for line in err.splitlines() if line.strip()][-1].startswith(
            "phaseaware: error: "
        ), err
    assert Path(files["log"]).read_bytes() == before  # the calibration log is never touched
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)  # the device node survives (as root too)
    assert not CALLS, "a probe ran before the path check"


def test_shadowing_is_in_what_the_lookup_returns(
    files: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from phaseaware.errors import PhaseawareWarning
    from phaseaware.profiles.registry import find_profile

    monkeypatch.setenv("PHASEAWARE_PROFILE_PATH", files["shadow"])
    with pytest.warns(PhaseawareWarning, match="shadows the built-in"):
        entry = find_profile("deepseek-v4-flash-base")
    assert entry.origin == "env" and entry.shadows == BUILTIN
    monkeypatch.delenv("PHASEAWARE_PROFILE_PATH")
    assert find_profile("deepseek-v4-flash-base").shadows is None


def test_group_writable_profile_file_refused(tmp_path: Path) -> None:
    from phaseaware.errors import ProfileError
    from phaseaware.profiles.registry import get_profile

    path = tmp_path / "p.json"
    path.write_text(BUILTIN.read_text(encoding="utf-8"), encoding="utf-8")
    path.chmod(0o664)
    with pytest.raises(ProfileError, match=r"writable by other users \(mode 664\).*chmod go-w"):
        get_profile(path)
    path.chmod(0o644)
    assert get_profile(path).model == "deepseek-v4-flash-base"


def test_builtin_profiles_still_load() -> None:
    from phaseaware.profiles.io import validate_profile_file

    for path in sorted(builtin_profile_dir().glob("*.json")):
        assert validate_profile_file(path) == [], path


LOCK_HOLDER = textwrap.dedent(
    """
    import sys, time
    from phaseaware.filelock import hold_lock
    with hold_lock(sys.argv[1], what="calibration log"):
        print("held", flush=True)
        time.sleep(60)
    """
)


def test_second_calibrate_on_the_same_log_fails_at_once(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    log = Path(files["tmp"]) / "run.jsonl"
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(log)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
        code = main([*CAL, "--log", str(log), "--out", str(Path(files["tmp"]) / "p.json")])
        err = capsys.readouterr().err
        assert code == 1
        assert f"calibration log {log} is in use by process {holder.pid}" in err
        assert not CALLS and not log.exists()
    finally:
        holder.kill()
        holder.wait()
    # the lock dies with its holder (kill -9 included): the same command now runs
    assert main([*CAL, "--log", str(log), "--out", str(Path(files["tmp"]) / "p.json")]) == 0
    assert CALLS and log.is_file()


def test_calibrate_log_equals_out_keeps_an_existing_log(
    files: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    before = Path(files["log"]).read_bytes()
    code = main([*CAL, "--log", files["log"], "--out", files["link"]])
    assert code == 1 and "is the same file as --log" in capsys.readouterr().err
    assert Path(files["log"]).read_bytes() == before and not CALLS


def test_options_range_checked() -> None:
    from phaseaware import AssemblyOptions
    from phaseaware.errors import InputError

    for kwargs, message in (
        ({"position_offset": 10**29}, "options.position_offset must be at most 1000000"),
        ({"period": 10**20}, "options.period must be an int in [1, 512]"),
        ({"pad_cost": float("inf")}, "options.pad_cost must be at most 1e+06"),
        ({"max_keys_per_chunk": 10**30}, "options.max_keys_per_chunk must be in [1, 10000]"),
        ({"pad": "false"}, "options.pad must be true or false"),
    ):
        with pytest.raises(InputError) as info:
            AssemblyOptions(**kwargs)  # type: ignore[arg-type]
        assert message in str(info.value)


def test_budget_range_checked(cl100k) -> None:
    from phaseaware import Chunk, assemble
    from phaseaware.errors import InputError

    with pytest.raises(InputError, match="budget_tokens must be at most 100000000 tokens"):
        assemble(
            [Chunk(text="t")],
            tokenizer=cl100k,
            chat_format="none",
            question="q",
            budget_tokens=10**29,
        )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": None}, "documents[0]: the text must be a str, got NoneType"),
        ({"text": b"bytes"}, "the text must be a str, got bytes"),
        ({"text": "t", "score": "0.9"}, "documents[0].score must be a number, got '0.9'"),
        ({"text": "t", "score": None}, "documents[0].score must be a number, got None"),
        ({"text": "t", "score": float("nan")}, "documents[0].score must be a number"),
        ({"text": "t", "evidence": 5}, "documents[0].evidence must be a list of strings"),
        ({"text": "t", "id": 3}, "documents[0].id must be a str"),
    ],
)
def test_make_chunk_refuses_ill_typed_parts(kwargs: dict, message: str) -> None:
    from phaseaware import make_chunk
    from phaseaware.errors import InputError

    with pytest.raises(InputError) as info:
        make_chunk(**kwargs, where="documents[0]")
    assert message in str(info.value)


def test_make_chunk_builds_checked_chunks() -> None:
    from phaseaware import Chunk, make_chunk

    metadata = {"source": "a"}
    chunk = make_chunk(text="t", score=1, id="a", evidence=["t"], metadata=metadata)
    assert chunk == Chunk(text="t", score=1.0, id="a", evidence=("t",))
    assert chunk.metadata == metadata and chunk.metadata is not metadata


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"prompt": ""}, "'prompt' must not be empty"),
        ({"prompt": [""]}, "'prompt' must not be empty"),
    ],
)
def test_server_empty_prompt_is_a_400(payload: dict, message: str) -> None:
    import http.client

    from tests.support.fault_server import start_server
    from tests.support.task_engine import TaskLookupEngine

    with start_server(TaskLookupEngine()) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
        body = json.dumps({"model": "phaseaware-task-lookup", "max_tokens": 4, **payload})
        conn.request("POST", "/v1/completions", body=body.encode(), headers={
            "Content-Type": "application/json"})  # fmt: skip
        response = conn.getresponse()
        doc = json.loads(response.read())
        conn.close()
    assert response.status == 400
    assert doc["error"]["param"] == "prompt" and message in doc["error"]["message"]


def test_server_empty_messages_is_a_400() -> None:
    import http.client

    from tests.support.fault_server import start_server
    from tests.support.task_engine import TaskLookupEngine

    with start_server(TaskLookupEngine()) as server:
        conn = http.client.HTTPConnection(server.host, server.port, timeout=5)
        body = json.dumps({"model": "phaseaware-task-lookup", "messages": []})
        conn.request("POST", "/v1/chat/completions", body=body.encode(), headers={
            "Content-Type": "application/json"})  # fmt: skip
        response = conn.getresponse()
        doc = json.loads(response.read())
        conn.close()
    assert response.status == 400 and doc["error"]["param"] == "messages"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**40), 10**40) | st.floats(allow_nan=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
BOOL_KEYS = ("pad", "repeat", "length_pad", "allow_tokenizer_mismatch", "thinking")


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(key=st.sampled_from(sorted(RequestOptions.__struct_fields__)), value=JSON_VALUES)
def test_any_option_value_is_accepted_or_a_typed_error(key: str, value: object) -> None:
    """Property: a request's option either parses to the same value or is an InputError;
    booleans are only JSON booleans; integers outside the limits never reach arithmetic."""
    from phaseaware.cli.request import parse_request
    from phaseaware.errors import InputError

    doc = _request(**{key: value})
    doc["chunks"] = doc["chunks"][:1]
    try:
        kwargs = parse_request(doc, source="req.json")
    except InputError as exc:
        assert str(exc).startswith("req.json: ")
        return
    if key in BOOL_KEYS:
        assert type(value) is bool
        got = kwargs["thinking"] if key == "thinking" else getattr(kwargs["options"], key)
        assert got is value
    if key in ("position_offset", "period", "max_keys_per_chunk", "repeat_max_chars"):
        assert (key == "period" and value is None) or (type(value) is int and 0 <= value <= 10**6)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(name=st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=20))
def test_unknown_request_keys_are_refused(name: str) -> None:
    from phaseaware.cli.request import parse_request
    from phaseaware.errors import InputError

    if name in Request.__struct_fields__:
        return
    with pytest.raises(InputError, match=f"unknown key '{name}'"):
        parse_request({**_request(), name: 1}, source="req.json")
