"""Endpoint records: what ``phaseaware probe-endpoint`` learned about one (base URL, model).

A record says how the server's token positions relate to phaseaware's rendering:
``offset`` (tokens the server puts before the prompt's own tokens), ``mode``
(``exact``: compared token by token via ``/tokenize``; ``count``: inferred from
``usage.prompt_tokens``), ``stability`` (``constant``, or ``varying`` with the
observed ``offsets``), the date, the tokenizer (spec + fingerprint) and the chat
format it was measured with, the chat settings every request states (``thinking``,
sent as ``chat_template_kwargs``), what the server does when a request names none
(``server_default``, exact mode), the served checkpoint's identity as the server
reports it (``served_model``, ``system_fingerprint``: the per-call check warns when
they change), the DeepSeek-V4.1 effort table the server uses (``effort_budgets``,
exact mode), and where the probe read the server's ids (``ids_route``: vLLM's
render endpoint or ``/tokenize``; ``ids_note``: token offsets checked, or why not), the
server software when recognised (``server``) and, for the ``hf`` format, the sha256 of the
Jinja template the probes were rendered with (``chat_template_sha256``;
:mod:`phaseaware.endpoints.server`).

:mod:`phaseaware.endpoints.probe` discovers and writes it; the CLI's request format
(:mod:`phaseaware.cli.request`, a request's ``"endpoint"`` key) and the adapters read it. Records
are versioned JSON (``schema: phaseaware.endpoint/v1``), one file per
(base URL, model) in ``endpoint_dir()`` (``$PHASEAWARE_HOME/endpoints``, else
``$XDG_CONFIG_HOME/phaseaware/endpoints``: the profiles' user folder's sibling),
written atomically. API keys are never stored; credentials in URLs are redacted.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from phaseaware.assembly.inputs.options import AssemblyOptions
from phaseaware.atomic import atomic_write_text
from phaseaware.errors import FingerprintMismatchError, InputError
from phaseaware.profiles.registry import user_profile_dir
from phaseaware.redact import redact_url
from phaseaware.tokenizers.base import Tokenizer
from phaseaware.userfiles import parse_json_document, read_user_text

__all__ = [
    "RECORD_SCHEMA",
    "EndpointRecord",
    "apply_endpoint",
    "with_endpoint",
    "endpoint_dir",
    "find_endpoint_record",
    "load_endpoint_record",
    "record_path",
    "redact_url",
    "resolve_endpoint",
    "save_endpoint_record",
]

RECORD_SCHEMA = "phaseaware.endpoint/v1"
Mode = Literal["exact", "count"]
Stability = Literal["constant", "varying"]


def _normalized_base(url: str) -> str:
    return redact_url(url.strip()).rstrip("/")


@dataclass(frozen=True)
class EndpointRecord:
    """One probe's finding. Positions the model sees = prompt token index + offset."""

    base_url: str  # redacted, no trailing slash
    model: str
    offset: int  # the offset to use: the only one when constant, the smallest when varying
    offsets: tuple[int, ...]  # every offset observed (one element when constant)
    mode: Mode
    stability: Stability
    date: str  # ISO 8601, UTC
    tokenizer_spec: str
    tokenizer_fingerprint: str
    chat_format: str
    probes: int  # requests the probe sent
    tool_version: str
    thinking: bool = False  # the setting the probe rendered with and every request states
    server_default: Mapping[str, Any] | None = None  # what a request naming none gets
    served_model: str | None = None  # the response's "model"
    system_fingerprint: str | None = None  # the response's "system_fingerprint"
    settings_check: str | None = None  # count mode: "verified" or why it cannot tell
    effort_budgets: str | None = None  # V4.1: the effort table the server uses (exact mode)
    ids_route: str | None = None  # exact mode: "render" or "tokenize", where the ids came from
    ids_note: str | None = None  # what the probe learned about those routes (offsets, why not)
    server: str | None = None  # the server software, when recognised ("llama-cpp-python 0.3.36")
    chat_template_sha256: str | None = None  # hf format: sha256 of the Jinja template probed
    tool_arguments: str | None = None  # hf: how the server hands tool-call arguments over
    renderer: str | None = None  # DeepSeek formats: "sglang" (deepseek-recipe); None: vLLM's
    effort_texts: str | None = None  # deepseek-v4: the effort texts the server writes
    schema: str = RECORD_SCHEMA

    def __post_init__(self) -> None:
        if self.mode not in ("exact", "count"):
            raise InputError(f"endpoint record mode must be exact or count, got {self.mode!r}")
        if self.stability not in ("constant", "varying"):
            raise InputError(f"endpoint record stability is unknown: {self.stability!r}")
        offsets = self.offsets
        if (
            not offsets
            or any(isinstance(d, bool) or not isinstance(d, int) or d < 0 for d in offsets)
            or list(offsets) != sorted(set(offsets))
            or self.offset != offsets[0]
            or (self.stability == "constant") != (len(offsets) == 1)
        ):
            raise InputError(
                f"endpoint record offsets {offsets!r} / offset {self.offset!r} / stability "
                f"{self.stability!r} are inconsistent; rerun `phaseaware probe-endpoint`"
            )
        if self.renderer not in (None, "vllm", "sglang"):
            raise InputError(
                f"endpoint record renderer must be vllm or sglang, got {self.renderer!r}; "
                "rerun `phaseaware probe-endpoint`"
            )
        if self.effort_texts not in (None, "0731", "preview"):
            raise InputError(
                f"endpoint record effort_texts must be 0731 or preview, got "
                f"{self.effort_texts!r}; rerun `phaseaware probe-endpoint`"
            )
        if self.tool_arguments not in (None, "object", "string"):
            raise InputError(
                f"endpoint record tool_arguments must be object or string, got "
                f"{self.tool_arguments!r}; rerun `phaseaware probe-endpoint`"
            )

    def to_dict(self) -> dict[str, Any]:
        doc = dataclasses.asdict(self)
        doc["offsets"] = list(self.offsets)
        doc["server_default"] = dict(self.server_default) if self.server_default else None
        for name in _WRITTEN_WHEN_SET:  # records from before these fields read back unchanged
            if doc[name] is None:
                del doc[name]
        schema = doc.pop("schema")
        return {"schema": schema, **doc}

    @classmethod
    def from_dict(cls, doc: Mapping[str, Any], *, source: str = "<record>") -> EndpointRecord:
        if not isinstance(doc, Mapping) or doc.get("schema") != RECORD_SCHEMA:
            raise InputError(
                f"{source} is not an endpoint record (schema {RECORD_SCHEMA}); "
                "write one with `phaseaware probe-endpoint`"
            )
        names = {f.name for f in dataclasses.fields(cls)}
        missing = sorted(names - set(doc) - _OPTIONAL)
        if missing:
            raise InputError(f"{source}: endpoint record lacks {', '.join(missing)}")
        try:
            values = {k: doc[k] for k in names if k in doc}
            values["offsets"] = tuple(values["offsets"])
            return cls(**values)
        except TypeError as exc:
            raise InputError(f"{source}: malformed endpoint record ({exc})") from exc

    def check_tokenizer(self, tokenizer: Tokenizer) -> None:
        """``FingerprintMismatchError`` unless ``tokenizer`` is the one probed with."""
        actual = tokenizer.fingerprint()
        if actual != self.tokenizer_fingerprint:
            raise FingerprintMismatchError(
                f"endpoint record for {self.model!r} at {self.base_url} was probed with "
                f"tokenizer {self.tokenizer_spec!r} (fingerprint {self.tokenizer_fingerprint}), "
                f"but tokenizer {tokenizer.spec!r} has fingerprint {actual}; use the tokenizer "
                f"{self.tokenizer_spec!r} or rerun `phaseaware probe-endpoint --tokenizer "
                f"{tokenizer.spec}`"
            )


# fields a record written before they existed may lack (their defaults apply)
_WRITTEN_WHEN_SET = (
    "effort_budgets", "ids_route", "ids_note", "tool_arguments", "renderer", "effort_texts",
)  # fmt: skip
_OPTIONAL = frozenset(
    {"thinking", "server_default", "served_model", "system_fingerprint", "settings_check",
     "server", "chat_template_sha256"}
    | set(_WRITTEN_WHEN_SET)
)  # fmt: skip


def endpoint_dir() -> Path:
    """The user's endpoint-record folder (may not exist yet)."""
    return user_profile_dir().parent / "endpoints"


def record_path(
    base_url: str, model: str, *, directory: str | os.PathLike[str] | None = None
) -> Path:
    """The record file of (``base_url``, ``model``): a readable slug plus a short hash."""
    base = _normalized_base(base_url)
    digest = hashlib.sha256(f"{base}\n{model}".encode()).hexdigest()[:12]
    host = urlsplit(base).netloc.rsplit("@", 1)[-1] or "endpoint"
    slug = re.sub(r"[^A-Za-z0-9.+-]+", "-", f"{host}-{model}").strip("-.")[:80]
    folder = Path(directory).expanduser() if directory is not None else endpoint_dir()
    return folder / f"{slug}-{digest}.json"


def save_endpoint_record(
    record: EndpointRecord, *, directory: str | os.PathLike[str] | None = None
) -> Path:
    """Write ``record`` atomically to its ``record_path`` (folder created); return the path."""
    path = record_path(record.base_url, record.model, directory=directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(record.to_dict(), indent=2, sort_keys=False) + "\n"
    return atomic_write_text(path, text)


def load_endpoint_record(path: str | os.PathLike[str]) -> EndpointRecord:
    """Read and validate a record file (``InputError`` with the fix when it is not one)."""
    hint = "write it with `phaseaware probe-endpoint`"
    try:
        text = read_user_text(Path(path).expanduser(), what="endpoint record")
    except InputError as exc:
        raise InputError(f"{exc}; {hint}") from None
    doc = parse_json_document(text, source=f"endpoint record {os.fspath(path)!r}", hint=hint)
    return EndpointRecord.from_dict(doc, source=os.fspath(path))


def find_endpoint_record(
    base_url: str, model: str, *, directory: str | os.PathLike[str] | None = None
) -> EndpointRecord:
    """The stored record of (``base_url``, ``model``) (``InputError`` if none)."""
    path = record_path(base_url, model, directory=directory)
    if not path.is_file():
        raise InputError(
            f"no endpoint record for model {model!r} at {_normalized_base(base_url)}; run "
            f"`phaseaware probe-endpoint --base-url {_normalized_base(base_url)} --model {model} "
            "--tokenizer T --chat-format F` first"
        )
    return load_endpoint_record(path)


def resolve_endpoint(ref: object, *, source: str = "<request>") -> EndpointRecord:
    """A record from a request's ``"endpoint"`` value: ``{"base_url", "model"}`` or a path."""
    if isinstance(ref, str):
        return load_endpoint_record(ref)
    if (
        isinstance(ref, Mapping)
        and set(ref) == {"base_url", "model"}
        and all(isinstance(ref[k], str) and ref[k] for k in ("base_url", "model"))
    ):
        return find_endpoint_record(str(ref["base_url"]), str(ref["model"]))
    raise InputError(
        f"{source}: key 'endpoint' must be a record path or "
        '{"base_url": ..., "model": ...}, got ' + repr(ref)[:80]
    )


def _offset_text(offsets: tuple[int, ...]) -> str:
    return f"offset {offsets[0]}" if len(offsets) == 1 else f"offsets {list(offsets)}"


def with_endpoint(
    options: AssemblyOptions, record: EndpointRecord, tokenizer: Tokenizer
) -> AssemblyOptions:
    """``options`` with the record's offset (constant) or offset set (varying).

    THE rule, for the CLI's request files and every framework adapter alike:
    ``FingerprintMismatchError`` for a record probed with another tokenizer; an offset
    already in ``options`` (``position_offset``/``offsets``) that agrees with the
    record is accepted; one that disagrees is an ``InputError`` naming both.
    """
    record.check_tokenizer(tokenizer)
    want = record.offsets if record.stability == "varying" else (record.offset,)
    if options.position_offset or options.offsets:
        have = tuple(options.offsets) if options.offsets else (options.position_offset,)
        if have != tuple(want):
            raise InputError(
                f"position_offset/offsets say {_offset_text(have)}, but the endpoint "
                f"record for {record.model!r} at {record.base_url} says "
                f"{_offset_text(tuple(want))} ({record.stability}); pass only the endpoint "
                "record, or rerun `phaseaware probe-endpoint` if the server changed"
            )
    if record.stability == "constant":
        return dataclasses.replace(options, position_offset=record.offset, offsets=None)
    return dataclasses.replace(options, position_offset=0, offsets=record.offsets)


#: The former name of :func:`with_endpoint`.
apply_endpoint = with_endpoint
