"""Hostile input, round 5 (issue 38): ``score``'s readers bounded in time and memory.

The cases that found the causes: 9 MB of ``{}`` lines (every skip kept: 632 MB), a dense
HELMET document and a dense JSONL line (parsed whole: 12 GB for 128 MiB), NIAH contexts
named by the log's own ``file_name`` (a FIFO, ``/dev/zero``, non-UTF-8, a NUL, an
absolute or ``../`` name), a FIFO as the log, a catastrophic ``--key-regex``, a ``--plot``
extension checked after ``--profile-out`` was written, and keys all at one residue.
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from pathlib import Path

import pytest

from phaseaware.cli.main import main
from phaseaware.scoring.formats import ReadOptions, bounded, common, niah
from phaseaware.scoring.formats.bounded import parse_budget, parse_estimate

TOKENIZER = "tiktoken:cl100k_base"
SCORE = ["score", "--tokenizer", TOKENIZER]


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "this is a bug" not in err, err
    if code == 1:
        assert err.count("phaseaware: error: ") == 1 and err.count("\n") == 1, err
    return code, out, err


def _sample(i: int) -> dict[str, object]:
    pad = "filler text. " * (3 + i % 11)
    return {"prompt": f"{pad}The key is K{i}x. {pad}", "needle": f"K{i}x", "correct": i % 3 != 0}


@pytest.fixture()
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _good_lines(n: int = 40) -> list[str]:
    return [json.dumps(_sample(i)) for i in range(n)]


# --- skips counted, not kept ----------------------------------------------------------


def test_a_million_skips_are_counted_not_kept(folder, capsys):
    """3 MB of ``{}`` lines (the 9 MB case, a third of it): the skips cost a counter."""
    (folder / "e.jsonl").write_text("\n".join(_good_lines()) + "\n" + "{}\n" * 1_000_000)
    tracemalloc.start()
    code, out, _ = _run([*SCORE, "--format", "jsonl", "e.jsonl", "--json"], capsys)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    doc = json.loads(out)
    assert code == 0 and doc["n_scored"] == 40 and doc["n_skipped"] == 1_000_000
    assert doc["skip_counts"] == {"no-prompt": 1_000_000}
    assert len(doc["skipped"]) == 50  # the first few, for the report
    assert peak < 60 << 20, f"{peak >> 20} MiB"  # was 632 MB for 9 MB of lines


# --- documents and lines parsed within a bound -----------------------------------------


@pytest.mark.parametrize(
    "shape",
    ["[" + ",".join(["{}"] * 200_000) + "]", "[" + ",".join(["[]"] * 200_000) + "]",
     "[" + ",".join(["1.5"] * 200_000) + "]", "[" + ",".join(['"ab"'] * 200_000) + "]",
     "{" + ",".join(f'"key_{i}":"v{i}"' for i in range(100_000)) + "}",
     json.dumps(["é" * 50 + "\U0001f600"] * 20_000, ensure_ascii=False)],
)  # fmt: skip
def test_the_parse_estimate_bounds_what_json_loads_holds(shape):
    tracemalloc.start()
    json.loads(shape)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert parse_estimate(shape) >= peak


def test_a_dense_helmet_document_is_refused_naming_the_flag(folder, capsys):
    """2 MiB of ``{}`` values under a 1 MiB cap: 48 MiB to parse; refused, unparsed."""
    data = [{"input_text": f"a K{i}x b", "answer": [f"K{i}x"], "exact_match": 1} for i in range(4)]
    doc = json.dumps({"data": data, "pad": [{}] * 700_000})
    (folder / "h.json").write_text(doc, encoding="utf-8")
    start = time.monotonic()
    code, _, err = _run([*SCORE, "--format", "helmet", "h.json", "--max-document-mb", "1"], capsys)
    assert code == 1 and "--max-document-mb" in err and "is over 1 MiB" in err
    assert time.monotonic() - start < 5


def test_a_dense_document_within_its_size_cap_is_refused_by_its_parse_budget(tmp_path):
    dense = "[" + ",".join(["{}"] * 400_000) + "]"  # 1.2 MB, about 60 MB to parse
    (tmp_path / "h.json").write_text(dense, encoding="utf-8")
    with pytest.raises(common.EvalLogError, match="--max-document-mb") as info:
        common.read_json(tmp_path / "h.json", cap=2 << 20)
    assert "parsing it would take" in str(info.value)
    assert parse_estimate(dense) > parse_budget(2 << 20)


def test_a_dense_jsonl_line_is_skipped_naming_the_flag(folder, capsys, monkeypatch):
    monkeypatch.setattr(bounded, "PARSE_FLOOR", 0)
    dense = json.dumps({**_sample(99), "pad": [{}] * 200_000})  # 0.6 MB, ~30 MB to parse
    (folder / "e.jsonl").write_text("\n".join([*_good_lines(), dense]) + "\n")
    code, out, _ = _run(
        [*SCORE, "--format", "jsonl", "e.jsonl", "--json", "--max-line-mb", "1"], capsys
    )
    doc = json.loads(out)
    assert code == 0 and doc["n_scored"] == 40
    assert "--max-line-mb" in doc["skipped"][0]["detail"]


# --- NIAH contexts: the log names them -------------------------------------------------


def _niah(folder: Path, names: list[str]) -> Path:
    results, contexts = folder / "results", folder / "contexts"
    results.mkdir()
    contexts.mkdir()
    for i in range(8):
        context = "hay. " * 20 + "so " * i + f"The key is K{i}x. " + "hay. " * 20
        (contexts / f"c{i}_context.txt").write_text(context, encoding="utf-8")
        record = {"needle": f"\nK{i}x\n", "score": 10 if i % 2 else 1, "file_name": f"c{i}"}
        (results / f"c{i}_results.json").write_text(json.dumps(record), encoding="utf-8")
    for k, name in enumerate(names):
        record = {"needle": "\nK0x\n", "score": 10, "file_name": name}
        (results / f"bad{k}_results.json").write_text(json.dumps(record), encoding="utf-8")
    return contexts


@pytest.mark.parametrize(
    ("make", "name", "detail"),
    [
        (lambda c: os.mkfifo(c / "fifo_context.txt"), "fifo", "FIFO"),
        (lambda c: (c / "zero_context.txt").symlink_to("/dev/zero"), "zero", "resolves outside"),
        (lambda c: (c / "bin_context.txt").write_bytes(b"\xff\xfe K0x"), "bin", "not UTF-8"),
        (lambda c: None, "a\x00b", "not a file name"),
        (lambda c: (c.parent / "out_context.txt").write_text("K0x"), "../out", "outside"),
        (lambda c: (c.parent / "abs_context.txt").write_text("K0x"), "ABS", "outside"),
        (lambda c: (c / "up_context.txt").symlink_to(c.parent / "abs_context.txt"), "up",
         "resolves outside"),
        (lambda c: None, "nothing", "is missing"),
    ],
)  # fmt: skip
def test_niah_context_files_are_checked(folder, capsys, make, name, detail):
    contexts = folder / "contexts"
    if name == "ABS":
        name = str(folder / "abs")
    if name == "up":
        (folder / "abs_context.txt").write_text("K0x", encoding="utf-8")
    _niah(folder, [name])
    make(contexts)
    start = time.monotonic()
    code, out, _ = _run(
        [*SCORE, "--format", "niah", "results", "--chat-format", "chatml", "--json",
         "--period", "2"],
        capsys,
    )  # fmt: skip
    assert time.monotonic() - start < 30  # a FIFO never blocks, /dev/zero is never read
    doc = json.loads(out)
    assert code == 0 and doc["n_scored"] == 8 and doc["n_skipped"] == 1
    assert detail in doc["skipped"][0]["detail"]


def test_a_device_is_never_read(tmp_path):
    start = time.monotonic()
    with pytest.raises(common.EvalLogError, match="character device"):
        bounded.read_regular(Path("/dev/zero"), cap=1 << 30, flag="--max-document-mb")
    assert time.monotonic() - start < 1


def test_a_context_over_the_cap_is_skipped_unread(tmp_path):
    (tmp_path / "big_context.txt").write_bytes(b"x" * 3000)
    with pytest.raises(common.EvalLogError, match="over 1024 bytes.*--max-document-mb"):
        bounded.read_context(tmp_path, "big", cap=1024, flag="--max-document-mb")
    options = ReadOptions(max_document_bytes=1024)
    assert options.document_cap() == 1024 and niah.DOCUMENT_FLAG == "--max-document-mb"


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_fifo_or_device_as_the_log_is_named_for_what_it_is(folder, capsys, kind):
    if kind == "fifo":
        os.mkfifo(folder / "log.jsonl")
        path, word = "log.jsonl", "FIFO"
    else:
        path, word = "/dev/zero", "character device"
    code, _, err = _run([*SCORE, "--format", "jsonl", path], capsys)
    assert code == 1 and word in err and "does not exist" not in err


# --- regexes, plots, one residue -------------------------------------------------------


def test_a_catastrophic_key_regex_stops_at_its_time_limit(folder, capsys):
    lines = [json.dumps({**_sample(i), "needle": "a" * 40 + f"K{i}x"}) for i in range(4)]
    for i, line in enumerate(lines):
        lines[i] = line.replace("The key is K", "The key is " + "a" * 40 + "K")
    (folder / "e.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    start = time.monotonic()
    code, _, err = _run([*SCORE, "--format", "jsonl", "e.jsonl", "--key-regex", "(a|aa)+$"],
                        capsys)  # fmt: skip
    assert code == 1 and "'(a|aa)+$'" in err and "1 s time limit" in err
    assert time.monotonic() - start < 20


def test_an_unknown_plot_extension_fails_before_any_output(folder, capsys):
    pytest.importorskip("matplotlib")  # without it, --plot fails earlier still
    (folder / "e.jsonl").write_text("\n".join(_good_lines()) + "\n", encoding="utf-8")
    code, _, err = _run(
        [*SCORE, "--format", "jsonl", "e.jsonl", "--model", "m", "--profile-out", "p.json",
         "--plot", "chart.xyz"],
        capsys,
    )  # fmt: skip
    assert code == 1 and "--plot" in err and ".xyz" in err and ".png" in err
    assert not (folder / "p.json").exists()


def test_keys_at_one_residue_get_scores_own_message(folder, capsys):
    lines = []
    for i in range(10):
        lines.append(json.dumps({"prompt": f"K{i}x filler", "needle": f"K{i}x", "correct": True}))
    (folder / "e.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    code, _, err = _run([*SCORE, "--format", "jsonl", "e.jsonl", "--server-bos", "none"], capsys)
    assert code == 1 and "residue 0 of period 8" in err and "measured probe" not in err


def test_an_lm_eval_record_with_a_list_filter_is_read_not_a_crash(folder, capsys):
    """Found by the round-5 property: ``"filter": []`` crashed the samples-file pre-pass
    (unhashable type 'list')."""
    bad = {"prompt": None, "messages": None, "needle": None, "correct": None, "filter": []}
    (folder / "samples_t.jsonl").write_text(json.dumps(bad) + "\n", encoding="utf-8")
    code, _, err = _run([*SCORE, "--format", "lm-eval", "samples_t.jsonl"], capsys)
    assert code == 1 and "no sample could be placed" in err
