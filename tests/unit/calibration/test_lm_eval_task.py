"""``calibrate --emit-lm-eval-task``: the task's documents are the calibration run's key-sweep
probes (same prompts, same key positions), each needle occurs once and starts at the key, and
the YAML is a local-only lm-eval task."""

from __future__ import annotations

import json

import pytest

from phaseaware.calibration.probes import ProbeSettings, iter_groups
from phaseaware.chat.layout import conversation_layout
from phaseaware.cli.main import main
from phaseaware.reference import probe_defaults
from phaseaware.tokenizers import load_tokenizer


def test_emitted_docs_are_the_calibration_probes(tmp_path, capsys):
    folder = tmp_path / "task"
    args = ["calibrate", "--period", "8", "--base-prompts", "2", "--emit-lm-eval-task",
            str(folder)]  # fmt: skip
    assert main(args) == 0
    assert "16 probes" in capsys.readouterr().out
    docs = [json.loads(line) for line in (folder / "phaseaware_phase_sweep.jsonl").open()]
    tok = load_tokenizer("reference")
    settings = ProbeSettings(
        n_offsets=8, base_prompts=2, seed=0, max_tokens=12, sweeps=("key",),
        context_tokens=probe_defaults.CONTEXT_TOKENS, distractors=probe_defaults.DISTRACTORS,
        depth=probe_defaults.DEPTH,
    )  # fmt: skip
    layout = conversation_layout(tokenizer=tok, chat_format="hf")
    probes = [p for g in iter_groups(tokenizer=tok, layout=layout, settings=settings)
              for p in g.probes]  # fmt: skip
    assert [(d["id"], d["prompt"], d["key_position"]) for d in docs] == [
        (p.probe_id, p.text, p.key_position) for p in probes
    ]
    assert sorted(d["residue"] for d in docs) == sorted(list(range(8)) * 2)
    for doc in docs:
        text = doc["prompt"]
        assert text.count(doc["needle"]) == 1
        tokens = tok.tokenize(text)
        assert tokens.token_at_char(text.index(doc["needle"])) == doc["key_position"]
        assert len(tokens) == doc["prompt_tokens"]


def test_yaml_is_a_local_lm_eval_task(tmp_path, capsys):
    yaml = pytest.importorskip("yaml")
    folder = tmp_path / "task"
    assert main(["calibrate", "--base-prompts", "1", "--emit-lm-eval-task", str(folder)]) == 0
    capsys.readouterr()
    config = yaml.safe_load((folder / "phaseaware_phase_sweep.yaml").read_text())
    assert config["dataset_path"] == "json"
    data = config["dataset_kwargs"]["data_files"]["test"]
    assert data == str((folder / "phaseaware_phase_sweep.jsonl").resolve())
    assert config["output_type"] == "generate_until"
    assert config["doc_to_text"] == "prompt" and config["doc_to_target"] == "answer"
    assert config["filter_list"][0]["filter"][0]["regex_pattern"] == r"(\d+)"


def _emit(folder, capsys, *flags: str) -> str:
    args = ["calibrate", "--period", "8", "--base-prompts", "2", *flags,
            "--emit-lm-eval-task", str(folder)]  # fmt: skip
    assert main(args) == 0
    return capsys.readouterr().out


def _docs(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_chat_task_documents_are_the_user_messages_a_chat_server_renders(tmp_path, capsys):
    """lm-eval's chat route sends ``doc_to_text`` as the one user message: the content holds
    no BOS text and no template, and the server's template (here phaseaware's ``hf``, the
    reference model's own) renders it back into the completions task's prompt, token for
    token, so the key sits where the completions document says."""
    from phaseaware.chat.formats import get_chat_format
    from phaseaware.chat.messages import parse_messages

    folder = tmp_path / "task"
    out = _emit(folder, capsys)
    assert "--tasks phaseaware_phase_sweep_chat" in out and "--apply_chat_template" in out
    assert "--chat-format hf" in out
    tok = load_tokenizer("reference")
    plain = _docs(folder / "phaseaware_phase_sweep.jsonl")
    chat = _docs(folder / "phaseaware_phase_sweep_chat.jsonl")
    assert [d["id"] for d in chat] == [d["id"] for d in plain]
    hf = get_chat_format("hf", tok)
    for doc, text_doc in zip(chat, plain, strict=True):
        assert "prompt" not in doc and doc["chat_format"] == "hf"
        content = doc["content"]
        assert tok.bos_text not in content and "<|user|>" not in content
        assert content.count(doc["needle"]) == 1 and content in text_doc["prompt"]
        rendered = hf.render(parse_messages([{"role": "user", "content": content}]))
        assert rendered == text_doc["prompt"]
        for field in ("answer", "needle", "key_position", "prompt_tokens", "residue"):
            assert doc[field] == text_doc[field]
        tokens = tok.tokenize(rendered)
        assert tokens.token_at_char(rendered.index(doc["needle"])) == doc["key_position"]


def test_chat_task_of_a_plain_prompt_drops_the_bos_text_and_positions(tmp_path, capsys):
    """``--chat-format none``: the content is the prompt after its BOS text (a chat server
    would read that text as content); the server's template places the key, so the chat
    documents state no positions, and the YAML states no chat_template_kwargs."""
    yaml = pytest.importorskip("yaml")
    folder = tmp_path / "task"
    out = _emit(folder, capsys, "--chat-format", "none")
    assert "--chat-format SERVER_FORMAT (or --server URL)" in out
    tok = load_tokenizer("reference")
    assert tok.bos_text
    plain = _docs(folder / "phaseaware_phase_sweep.jsonl")
    chat = _docs(folder / "phaseaware_phase_sweep_chat.jsonl")
    for doc, text_doc in zip(chat, plain, strict=True):
        assert text_doc["prompt"] == tok.bos_text + doc["content"]
        assert not doc["content"].startswith(tok.bos_text)
        assert doc["chat_format"] == "none"
        assert not {"key_position", "prompt_tokens", "residue"} & set(doc)
    config = yaml.safe_load((folder / "phaseaware_phase_sweep_chat.yaml").read_text())
    assert "chat_template_kwargs" not in config["generation_kwargs"]


def test_chat_yaml_is_the_completions_task_on_the_message_content(tmp_path, capsys):
    """The chat task differs from the completions task only in its name, its data file, the
    field sent (``content``) and the chat settings calibrate's requests state; grading,
    generation and the dataset builder are the same."""
    yaml = pytest.importorskip("yaml")
    folder = tmp_path / "task"
    _emit(folder, capsys)
    text = yaml.safe_load((folder / "phaseaware_phase_sweep.yaml").read_text())
    chat = yaml.safe_load((folder / "phaseaware_phase_sweep_chat.yaml").read_text())
    assert chat["task"] == "phaseaware_phase_sweep_chat"
    data = chat["dataset_kwargs"]["data_files"]["test"]
    assert data == str((folder / "phaseaware_phase_sweep_chat.jsonl").resolve())
    assert chat["doc_to_text"] == "content" and chat["doc_to_target"] == "answer"
    kwargs = chat["generation_kwargs"].pop("chat_template_kwargs")
    assert kwargs == {"thinking": False, "enable_thinking": False}  # what calibrate sends
    assert chat["generation_kwargs"] == text["generation_kwargs"]
    for key in ("task", "dataset_kwargs", "doc_to_text"):
        del chat[key], text[key]
    assert chat == text


@pytest.mark.parametrize("blocked", ["phaseaware_phase_sweep_chat.jsonl",
                                     "phaseaware_phase_sweep_chat.yaml"])  # fmt: skip
def test_chat_files_are_checked_before_any_file_is_written(tmp_path, capsys, blocked):
    """The chat task's files go through the same safe write as the completions task's: a
    FIFO where one of them goes is refused before any of the four files is written."""
    import os

    folder = tmp_path / "task"
    folder.mkdir()
    os.mkfifo(folder / blocked)
    args = ["calibrate", "--period", "8", "--base-prompts", "1", "--emit-lm-eval-task",
            str(folder)]  # fmt: skip
    assert main(args) == 1
    assert "FIFO" in capsys.readouterr().err
    assert sorted(p.name for p in folder.iterdir()) == [blocked]
