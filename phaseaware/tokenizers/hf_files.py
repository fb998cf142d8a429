"""A Hugging Face tokenizer folder read with ``tokenizers`` alone (no transformers, no torch).

``transformers.AutoTokenizer`` imports torch and takes seconds; a folder's
``tokenizer.json`` loads through the Rust ``tokenizers`` library in about 0.1 s.
:func:`read_tokenizer_folder` reads ``tokenizer.json`` plus what phaseaware
uses from the configuration (the BOS and EOS strings and the chat template:
``chat_template.jinja``, else ``chat_template.json``, else
``tokenizer_config.json``, as transformers looks them up).

It returns ``None`` (the caller then loads through transformers, exactly as
before) whenever transformers would build a different backend from the same
files: special or added tokens in the configuration that ``tokenizer.json``
lacks or flags differently, truncation or padding in ``tokenizer.json``, an
``add_prefix_space`` or ``from_slow`` override, or an ``add_bos_token`` /
``add_eos_token`` flag that the post-processor does not already implement. So
ids, offsets and the vocabulary fingerprint are the ones transformers gives.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["TokenizerFolder", "read_tokenizer_folder"]

_SPECIAL_KEYS = ("bos_token", "eos_token", "unk_token", "pad_token", "sep_token", "cls_token",
                 "mask_token")  # fmt: skip


@dataclass(frozen=True)
class TokenizerFolder:
    """``tokenizer.json`` loaded by ``tokenizers``, and the configuration phaseaware reads."""

    folder: Path
    backend: Any  # tokenizers.Tokenizer
    bos_token: str | None
    eos_token: str | None
    chat_template: str | None


def _content(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"] or None
    return None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _chat_template(folder: Path, config: dict[str, Any]) -> str | None:
    jinja = folder / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8") or None
    template = _read_json(folder / "chat_template.json").get("chat_template")
    if template is None:
        template = config.get("chat_template")
    if isinstance(template, list):  # named templates: the default one is the chat one
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default")
    return template if isinstance(template, str) and template else None


def _same_tokens(backend: Any, config: dict[str, Any]) -> bool:
    """Whether transformers would leave the added tokens of ``tokenizer.json`` as they are."""
    added = {t.content: (i, bool(t.special)) for i, t in backend.get_added_tokens_decoder().items()}
    specials = [_content(config.get(key)) for key in _SPECIAL_KEYS]
    for key in ("additional_special_tokens", "extra_special_tokens"):
        extra = config.get(key) or []
        specials += [_content(v) for v in (extra.values() if isinstance(extra, dict) else extra)]
    if any(s is not None and added.get(s, (None, False))[1] is not True for s in specials):
        return False
    declared = config.get("added_tokens_decoder") or {}
    if not isinstance(declared, dict):
        return False
    for token_id, token in declared.items():
        content = _content(token)
        special = bool(token.get("special", False)) if isinstance(token, dict) else False
        if content is None or added.get(content) != (int(token_id), special):
            return False
    return True


def _post_processor_agrees(backend: Any, config: dict[str, Any], bos: str | None) -> bool:
    ids = backend.encode("a", add_special_tokens=True).ids
    plain = backend.encode("a", add_special_tokens=False).ids
    if "add_bos_token" in config:
        bos_id = backend.token_to_id(bos) if bos else None
        adds_bos = bool(ids) and bos_id is not None and ids[0] == bos_id and ids != plain
        if adds_bos != bool(config["add_bos_token"]):
            return False
    if "add_eos_token" in config:
        eos = _content(config.get("eos_token"))
        eos_id = backend.token_to_id(eos) if eos else None
        adds_eos = bool(ids) and eos_id is not None and ids[-1] == eos_id and ids != plain
        if adds_eos != bool(config["add_eos_token"]):
            return False
    return True


def read_tokenizer_folder(folder: Path) -> TokenizerFolder | None:
    """The folder through ``tokenizers`` alone, or ``None`` where transformers must load it."""
    path = folder / "tokenizer.json"
    if not path.is_file():
        return None
    try:
        config = _read_json(folder / "tokenizer_config.json")
    except (OSError, ValueError):
        return None
    if "add_prefix_space" in config or config.get("from_slow"):
        return None
    from tokenizers import Tokenizer

    try:
        backend = Tokenizer.from_file(str(path))
    except Exception:  # a file tokenizers cannot read: transformers reports it properly
        return None
    if backend.truncation is not None or backend.padding is not None:
        return None
    bos = _content(config.get("bos_token"))
    if not _same_tokens(backend, config) or not _post_processor_agrees(backend, config, bos):
        return None
    return TokenizerFolder(
        folder=folder,
        backend=backend,
        bos_token=bos,
        eos_token=_content(config.get("eos_token")),
        chat_template=_chat_template(folder, config),
    )
