"""Durable log and runner: resume, torn lines, foreign logs, secrets, planted weak residue."""

from __future__ import annotations

import dataclasses
import json
import re
import zlib

import numpy as np
import pytest

from phaseaware.calibration.backends.callable import CallableBackend
from phaseaware.calibration.log import read_log
from phaseaware.calibration.probes import ProbeSettings, iter_groups
from phaseaware.calibration.report import format_report, summary_dict
from phaseaware.calibration.runner import build_profile_from_log, calibrate
from phaseaware.chat import conversation_layout
from phaseaware.cli.main import main
from phaseaware.errors import BackendError, LogError
from phaseaware.intervals import wilson_interval
from phaseaware.profiles.io import load_profile
from phaseaware.tokenizers import load_tokenizer

TOK = load_tokenizer("tiktoken:cl100k_base")
LAYOUT = conversation_layout(tokenizer=TOK, chat_format="chatml")
SETTINGS = ProbeSettings(context_tokens=160, n_offsets=8, base_prompts=40, seed=1)
WEAK = 5


def responder(weak: int = WEAK, *, seed: int = 0, log: list[str] | None = None):
    """Answers right with p=0.95, but p=0.3 when the key token's residue (read by tokenizing
    the prompt, as a real model would see it) equals ``weak``."""
    rng = np.random.default_rng(seed)

    def answer(prompt: str) -> str:
        name = re.findall(r"access code for (\w+) \?", prompt)[-1]
        match = re.search(rf"access code for {name} is (\d+)", prompt)
        key = TOK.tokenize(prompt).token_at_char(match.start() + len("access code for "))
        if log is not None:
            log.append(prompt)
        p = 0.3 if key % 8 == weak else 0.95
        return f"It is {match.group(1)}." if rng.random() < p else "I am not sure."

    return answer


def run(tmp_path, fn, *, backend=None, **kw):
    settings = kw.pop("settings", SETTINGS)
    return calibrate(
        backend=backend if backend is not None else CallableBackend(fn, name="sim"),
        tokenizer=TOK,
        layout=LAYOUT,
        settings=settings,
        model="sim-model",
        chat_format="chatml",
        log_path=tmp_path / "run.jsonl",
        period=settings.n_offsets,
        out_path=tmp_path / "sim.json",
        **kw,
    )


def test_planted_weak_residue_found(tmp_path):
    result = run(tmp_path, responder())
    assert result.analysis.stats.weak_residues == (WEAK,)
    profile = load_profile(tmp_path / "sim.json")
    assert profile.provenance.kind == "measured"
    assert profile.tokenizer.fingerprint == TOK.fingerprint()
    assert min(range(8), key=lambda r: profile.reliability[r]) == WEAK
    assert profile.n == (40,) * 8
    assert profile.length_residue_accuracy.kind == "measured"
    assert "stats" in profile.extra
    assert (
        build_profile_from_log(tmp_path / "run.jsonl").residue_accuracy == profile.residue_accuracy
    )


def test_resume_skips_done_and_tolerates_torn_line(tmp_path):
    small = ProbeSettings(context_tokens=160, n_offsets=4, base_prompts=3)
    calls: list[str] = []

    def flaky(prompt: str) -> str:
        if len(calls) == 10:
            raise KeyboardInterrupt
        calls.append(prompt)
        return "123"

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, flaky, settings=small)
    log = tmp_path / "run.jsonl"
    _, records = read_log(log)
    assert len(records) == 10
    with log.open("a") as handle:  # a kill mid-write leaves half a line
        handle.write('{"probe_id": "key:2:0", "swe')
    seen: list[str] = []
    result = run(tmp_path, responder(log=seen), settings=small)
    assert result.n_skipped == 10 and result.n_run == 24 - 10 and len(seen) == 14
    _, records = read_log(log)
    ids = [r.probe_id for r in records]
    assert len(ids) == len(set(ids)) == 24
    again = run(tmp_path, responder(log=seen), settings=small)  # complete: nothing re-runs
    assert again.n_run == 0 and len(seen) == 14


def test_a_log_written_before_the_chat_format_rename_resumes(tmp_path):
    """Old logs store the chat format as ``settings["template"]``; they are the same run."""
    import hashlib

    small = ProbeSettings(context_tokens=160, n_offsets=4, base_prompts=2)
    calls: list[str] = []

    def stop_after_five(prompt: str) -> str:
        if len(calls) == 5:
            raise KeyboardInterrupt
        calls.append(prompt)
        return "123"

    with pytest.raises(KeyboardInterrupt):
        run(tmp_path, stop_after_five, settings=small)
    log = tmp_path / "run.jsonl"
    header, *rest = log.read_text().splitlines(keepends=True)
    doc = json.loads(header)
    assert doc["settings"]["chat_format"] == "chatml"
    doc["settings"]["template"] = doc["settings"].pop("chat_format")  # as the old code wrote
    old = {"settings": doc["settings"], "tokenizer": TOK.fingerprint(), "model": "sim-model"}
    canonical = json.dumps(old, sort_keys=True, separators=(",", ":")).encode("utf-8")
    assert doc["fingerprint"] == "sha256:" + hashlib.sha256(canonical).hexdigest()
    log.write_text(json.dumps(doc, sort_keys=True) + "\n" + "".join(rest))
    result = run(tmp_path, responder(), settings=small)
    assert result.n_skipped == 5 and result.n_run == 16 - 5
    # the old log's profile keeps its words (the same data builds the same profile)
    assert "template 'chatml'" in result.profile.provenance.protocol
    fresh = run(tmp_path / "new", responder(), settings=small)
    assert "chat format 'chatml'" in fresh.profile.provenance.protocol


def test_foreign_and_mismatched_logs(tmp_path):
    log = tmp_path / "run.jsonl"
    log.write_text("hello world\n")
    with pytest.raises(LogError, match="--fresh"):
        run(tmp_path, responder())
    small = ProbeSettings(context_tokens=160, n_offsets=4, base_prompts=1)
    run(tmp_path, responder(), settings=small, fresh=True)
    other = ProbeSettings(context_tokens=160, n_offsets=4, base_prompts=1, seed=9)
    with pytest.raises(LogError, match="different run.*--log"):
        run(tmp_path, responder(), settings=other)
    lines = log.read_text().splitlines()
    lines.insert(2, "{not json")
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(LogError, match="corrupt"):
        run(tmp_path, responder(), settings=small)


def test_no_api_key_in_log(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-SECRET-1234567890")
    monkeypatch.setenv("PHASEAWARE_API_KEY", "pa-test-SECRET-0987654321")
    small = ProbeSettings(context_tokens=160, n_offsets=2, base_prompts=1)
    run(tmp_path, responder(), settings=small)
    text = (tmp_path / "run.jsonl").read_text()
    assert "SECRET" not in text
    header = json.loads(text.splitlines()[0])
    assert header["schema"] == "phaseaware.calibration-log/v1"
    assert "api_key" not in json.dumps(header).lower()


def test_backend_error_wrapped(tmp_path):
    def broken(prompt: str) -> str:
        raise RuntimeError("boom")

    with pytest.raises(BackendError, match="boom"):
        run(
            tmp_path,
            broken,
            settings=ProbeSettings(context_tokens=160, n_offsets=2, base_prompts=1),
        )


def test_cli_callable_json(tmp_path, monkeypatch, capsys):
    import sys
    import types

    module = types.ModuleType("cal_sim_module")
    module.answer = responder(weak=2)
    monkeypatch.setitem(sys.modules, "cal_sim_module", module)
    args = [
        "calibrate", "--backend", "callable", "--model", "cal_sim_module:answer",
        "--tokenizer", "tiktoken:cl100k_base", "--chat-format", "chatml",
        "--context-tokens", "160", "--base-prompts", "40", "--sweeps", "key",
        "--out", str(tmp_path / "p.json"), "--json",
    ]  # fmt: skip
    assert main(args) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["weak_residues"] == [2] and doc["probes_run"] == 320
    assert (tmp_path / "p.calibration.jsonl").is_file()
    assert main(args) == 0  # resumes: nothing left to run
    assert json.loads(capsys.readouterr().out)["probes_run"] == 0


def test_cli_plan(capsys):
    assert main(["calibrate", "--plan", "--detect-gap", "0.3", "--json", "--sweeps", "key"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["n_probes"] == doc["n_base_prompts"] * 8


def test_negative_position_offset_refused(tmp_path):
    from phaseaware.errors import CalibrationError

    small = ProbeSettings(context_tokens=160, n_offsets=2, base_prompts=1)
    with pytest.raises(CalibrationError, match="--prompt-token-offset"):
        run(tmp_path, responder(), settings=small, position_offset=-1)


def test_position_offset_shifts_logged_positions(tmp_path):
    small = ProbeSettings(context_tokens=160, n_offsets=4, base_prompts=2, sweeps=("key",))
    plain = run(tmp_path / "a", responder(), settings=small)
    shifted = run(tmp_path / "b", responder(), settings=small, position_offset=3)
    _, a = read_log(plain.log_path)
    _, b = read_log(shifted.log_path)
    pairs = {r.probe_id: r for r in a}
    for r in b:
        assert r.key_position == pairs[r.probe_id].key_position + 3
        assert r.prompt_tokens == pairs[r.probe_id].prompt_tokens + 3
    assert shifted.profile.extra["position_offset"] == 3
    assert plain.profile.extra["position_offset"] == 0


# ---------------------------------------------------------------------- window sweep

WINDOW = ProbeSettings(
    context_tokens=160, n_offsets=8, base_prompts=6, seed=2, sweeps=("key", "window")
)
NEAR = 28  # a key this close to the end (tokens) is answered; farther in-window keys are not


def right_by_distance(prompt: str) -> bool:
    """Whether the simulated model answers ``prompt``; a function of the prompt alone, so
    the probe order does not matter. Keys at distance (prompt tokens - key position) <= NEAR
    are right, those up to 40 tokens from the end wrong (the window sweep's range), far keys
    right unless their residue is ``WEAK`` and a hash of the prompt says so."""
    name = re.findall(r"access code for (\w+) \?", prompt)[-1]
    match = re.search(rf"access code for {name} is (\d+)", prompt)
    tokens = TOK.tokenize(prompt)
    key = tokens.token_at_char(match.start() + len("access code for "))
    distance = len(tokens) - key
    if distance <= 40:
        right = distance <= NEAR
    else:
        right = key % 8 != WEAK or zlib.crc32(prompt.encode()) % 3 == 0
    return right


def answer_by_distance(prompt: str) -> str:
    name = re.findall(r"access code for (\w+) \?", prompt)[-1]
    number = re.search(rf"access code for {name} is (\d+)", prompt).group(1)
    return f"It is {number}." if right_by_distance(prompt) else "I am not sure."


def distance_backend(local_window: int | None, fn=answer_by_distance) -> CallableBackend:
    """A simulated model; ``local_window`` is what its backend reports (like hf's config)."""
    backend = CallableBackend(fn, name="sim")
    if local_window is not None:
        backend.model_info["local_window"] = local_window
    return backend


def run_window(tmp_path, *, local_window: int | None, settings=WINDOW, **kw):
    return run(tmp_path, None, backend=distance_backend(local_window), settings=settings, **kw)


def _window_probes(settings=WINDOW):
    groups = iter_groups(tokenizer=TOK, layout=LAYOUT, settings=settings)
    return [p for g in groups for p in g.probes if p.sweep == "window"]


def test_window_sweep_writes_local_window_accuracy(tmp_path):
    probes = _window_probes()
    distances = sorted({p.prompt_tokens - p.key_position for p in probes})
    window = distances[3]  # the four nearest distances lie inside the window
    inside = [p for p in probes if p.prompt_tokens - p.key_position <= window]
    correct = sum(right_by_distance(p.text) for p in inside)
    assert 0 < correct < len(inside)  # the backend's answers depend on the distance

    result = run_window(tmp_path, local_window=window)
    effect = result.profile.local_window_accuracy
    assert (effect.n, effect.accuracy) == (len(inside), correct / len(inside))
    assert (effect.ci_low, effect.ci_high) == wilson_interval(correct, len(inside))
    assert (effect.min_distance, effect.max_distance) == (distances[0], window)
    assert "window sweep" in effect.source
    saved = load_profile(tmp_path / "sim.json")
    assert saved.local_window_accuracy == effect and saved.local_window == window
    assert saved.window_reliability() == effect.accuracy
    rows = result.analysis.window.by_distance
    assert [r.distance for r in rows] == distances
    assert sum(r.n for r in rows) == len(probes) == WINDOW.base_prompts * 8
    doc = summary_dict(result)
    assert doc["local_window_accuracy"]["n"] == len(inside)
    assert [r["inside_window"] for r in doc["window_by_distance"]] == [True] * 4 + [False] * (
        len(distances) - 4
    )


def test_no_local_window_no_field(tmp_path, capsys):
    result = run_window(tmp_path, local_window=None)
    assert result.profile.local_window_accuracy is None
    assert load_profile(tmp_path / "sim.json").local_window_accuracy is None
    assert "no local window" in result.analysis.window.note
    distances = {p.prompt_tokens - p.key_position for p in _window_probes()}
    rows = result.analysis.window.by_distance  # accuracy by distance is still shown
    assert {r.distance for r in rows} == distances
    out = format_report(result)
    assert "raw local window: unknown" in out and "no local window" in out
    doc = summary_dict(result)
    assert doc["local_window_accuracy"] is None
    assert len(doc["window_by_distance"]) == len(distances)


def test_window_smaller_than_nearest_key(tmp_path):
    nearest = min(p.prompt_tokens - p.key_position for p in _window_probes())
    result = run_window(tmp_path, local_window=nearest - 1)
    assert result.profile.local_window_accuracy is None
    assert "no window probe" in result.analysis.window.note


def test_window_sweep_leaves_key_stats_unchanged(tmp_path):
    plain_settings = dataclasses.replace(WINDOW, sweeps=("key",))
    plain = run_window(tmp_path / "a", local_window=30, settings=plain_settings)
    both = run_window(tmp_path / "b", local_window=30)
    assert plain.analysis.window is None and plain.profile.local_window_accuracy is None
    assert both.profile.local_window_accuracy is not None
    assert both.analysis.stats.to_dict() == plain.analysis.stats.to_dict()
    for field in ("residue_accuracy", "n", "ci_low", "ci_high", "reliability"):
        assert getattr(both.profile, field) == getattr(plain.profile, field)
    _, a = read_log(plain.log_path)
    _, b = read_log(both.log_path)

    def outcome(record):
        return dataclasses.replace(record, elapsed=0.0)

    assert [outcome(r) for r in b if r.sweep == "key"] == [outcome(r) for r in a]


def test_window_sweep_resumes(tmp_path):
    full = run_window(tmp_path / "full", local_window=30)
    calls = []

    def flaky(prompt: str) -> str:
        if len(calls) == 75:  # among base prompt 4's window probes (8 key, then 8 window)
            raise KeyboardInterrupt
        calls.append(prompt)
        return answer_by_distance(prompt)

    run = dict(
        tokenizer=TOK,
        layout=LAYOUT,
        settings=WINDOW,
        model="sim-model",
        chat_format="chatml",
        log_path=tmp_path / "part" / "run.jsonl",
        period=8,
    )
    with pytest.raises(KeyboardInterrupt):
        calibrate(backend=distance_backend(30, flaky), **run)
    resumed = calibrate(backend=distance_backend(30), **run)
    assert resumed.n_skipped == 75 and resumed.n_run == len(read_log(full.log_path)[1]) - 75
    assert resumed.profile.local_window_accuracy == full.profile.local_window_accuracy
    assert resumed.profile.residue_accuracy == full.profile.residue_accuracy


def test_calibrate_cli_reference_protocol_and_overrides(capsys) -> None:
    from phaseaware.cli.main import main

    # no model: the shipped model's protocol (300-token prompts, key and window sweeps)
    assert main(["calibrate", "--plan", "--base-prompts", "10"]) == 0
    out = capsys.readouterr().out
    assert "probes: 160" in out and f"tokens: {160 * (300 + 12):,}" in out
    args = ["calibrate", "--plan", "--base-prompts", "10", "--sweeps", "key"]
    assert main([*args, "--context-tokens", "200", "--distractors", "2", "--depth", "0.1,0.3"]) == 0
    out = capsys.readouterr().out
    assert "probes: 80" in out and f"tokens: {80 * (200 + 12):,}" in out
    for bad in ("0.5,0.2", "half", "0.1,1.5"):
        with pytest.raises(SystemExit):
            main([*args, "--depth", bad])
    assert "--depth" in capsys.readouterr().err


def test_plan_sizes_a_period_detecting_run_for_a_gap(capsys) -> None:
    import json as _json

    from phaseaware.cli.main import main

    argv = ["calibrate", "--plan", "--json", "--period", "auto", "--max-period", "32"]
    argv += ["--detect-gap", "0.06", "--gap-period", "2"]
    assert main(argv) == 0
    doc = _json.loads(capsys.readouterr().out)
    assert doc["power"] >= 0.8 and "find period 2" in doc["rationale"]
    assert main(["calibrate", "--plan", "--detect-gap", "0.06", "--gap-period", "2"]) == 1
    assert "--period auto" in capsys.readouterr().err


def test_period_auto_finds_a_short_period_through_calibrate(tmp_path):
    """``--period auto`` (period=None): a responder weak at odd key positions is found as
    period 2 among candidates 2..16 (every period up to --max-period), with the power of each candidate in the report."""
    rng = np.random.default_rng(3)

    def odd_weak(prompt: str) -> str:
        name = re.findall(r"access code for (\w+) \?", prompt)[-1]
        match = re.search(rf"access code for {name} is (\d+)", prompt)
        key = TOK.tokenize(prompt).token_at_char(match.start() + len("access code for "))
        p = 0.6 if key % 2 else 0.95
        return f"It is {match.group(1)}." if rng.random() < p else "I am not sure."

    settings = ProbeSettings(context_tokens=160, n_offsets=16, base_prompts=12, seed=2)
    result = calibrate(
        backend=CallableBackend(odd_weak, name="sim"),
        tokenizer=TOK,
        layout=LAYOUT,
        settings=settings,
        model="sim-model",
        chat_format="chatml",
        log_path=tmp_path / "auto.jsonl",
        period=None,
    )
    detection = result.profile.extra["period_detection"]
    assert detection["period"] == 2 == result.profile.period
    assert [row["period"] for row in detection["candidates"]] == list(range(2, 17))
    assert "power" in format_report(result)
