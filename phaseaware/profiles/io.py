"""Profile format v1: validate, read and write profile documents.

A profile document is a JSON object with ``"schema": "phaseaware.profile/v1"``
(see ``phaseaware.profiles.model.Profile`` for the meaning of each field). This module
is the only place that converts between the document and ``Profile``:

* ``profile_from_dict(doc)`` / ``profile_to_dict(profile)``: dict <-> Profile;
* ``loads_profile(text)`` / ``dumps_profile(profile)``: JSON text <-> Profile;
* ``load_profile(path)`` / ``save_profile(profile, path)`` (atomic write);
* ``validate_profile_dict(doc)`` / ``validate_profile_file(path)``: every
  problem as a list of messages (empty when valid).

Top-level keys other than the schema's are errors (a typo must not pass
silently), except what calibration records (``schema.EXTRA_KEYS``) and private
extensions named ``x-...``: those are kept in ``Profile.extra`` and written back
unchanged. Unknown keys inside ``tokenizer``, ``provenance`` and
``length_residue_accuracy`` are errors too. Output
is deterministic: a fixed key order (extras last, sorted), 2-space indent,
lists of numbers on one line, UTF-8, trailing newline.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from phaseaware.atomic import atomic_write_text
from phaseaware.errors import ProfileError, ProfileNotFoundError
from phaseaware.profiles.model import (
    SCHEMA,
    LengthResidueEffect,
    LocalWindowEffect,
    Profile,
    Provenance,
    TokenizerRef,
)
from phaseaware.profiles.schema import (
    KEY_ORDER,
    OPTIONAL_KEYS,
    REQUIRED_KEYS,
    SUPPORTED_SCHEMAS,
    validate_profile_dict,
)
from phaseaware.serialize import dataclass_to_dict
from phaseaware.userfiles import parse_json_document, read_user_text

__all__ = [
    "SUPPORTED_SCHEMAS",
    "dumps_profile",
    "load_profile",
    "loads_profile",
    "profile_from_dict",
    "profile_to_dict",
    "save_profile",
    "validate_profile_dict",
    "validate_profile_file",
]

# --------------------------------------------------------------------------- dict <-> Profile


def _raise(errors: list[str], source: str) -> None:
    count = f"{len(errors)} problems" if len(errors) > 1 else "1 problem"
    raise ProfileError(f"invalid profile {source} ({count}): " + "; ".join(errors))


def profile_from_dict(doc: Mapping[str, Any], *, source: str = "<dict>") -> Profile:
    """Build a ``Profile`` from a v1 document; raise ``ProfileError`` listing every problem.

    ``source`` (a file path or name) only appears in error messages. The
    caller's ``doc`` is not modified; unknown top-level keys are deep-copied
    into ``Profile.extra``.
    """
    errors = validate_profile_dict(doc)
    if errors:
        _raise(errors, source)
    tok, prov = doc["tokenizer"], doc["provenance"]
    length = doc.get("length_residue_accuracy")
    effect = None
    if length is not None:
        effect = LengthResidueEffect(
            period=length["period"],
            accuracy=tuple(None if a is None else float(a) for a in length["accuracy"]),
            kind=length["kind"],
            source=length["source"],
            n=tuple(length["n"]) if length.get("n") is not None else None,
            note=length.get("note"),
        )
    reliability = doc.get("reliability")
    window = doc.get("local_window_accuracy")
    known = set(REQUIRED_KEYS) | set(OPTIONAL_KEYS)
    return Profile(
        model=doc["model"],
        period=doc["period"],
        residue_accuracy=tuple(float(a) for a in doc["residue_accuracy"]),
        n=tuple(doc["n"]),
        ci_low=tuple(None if v is None else float(v) for v in doc["ci_low"]),
        ci_high=tuple(None if v is None else float(v) for v in doc["ci_high"]),
        tokenizer=TokenizerRef(spec=tok["spec"], fingerprint=tok["fingerprint"]),
        local_window=doc["local_window"],
        provenance=Provenance(**{k: prov[k] for k in Provenance.__dataclass_fields__}),
        compression_stride=doc.get("compression_stride"),
        length_residue_accuracy=effect,
        reliability=None if reliability is None else tuple(float(v) for v in reliability),
        local_window_accuracy=None if window is None else _window_from_dict(window),
        extra={k: copy.deepcopy(v) for k, v in doc.items() if k not in known},
    )


def profile_to_dict(profile: Profile) -> dict[str, Any]:
    """The v1 document of ``profile`` (keys in output order; optional keys only when set).

    Raises ``ProfileError`` when the result would not validate (e.g. an
    accuracy outside [0, 1], or an ``extra`` key that shadows a known key).
    """
    fields = dataclass_to_dict(profile)
    fields["length_residue_accuracy"] = _effect_to_dict(profile.length_residue_accuracy)
    doc: dict[str, Any] = {"schema": SCHEMA}
    for key in KEY_ORDER[1:]:
        if not (key in OPTIONAL_KEYS and fields[key] is None):
            doc[key] = fields[key]
    clash = sorted(set(profile.extra) & set(KEY_ORDER))
    if clash:
        raise ProfileError(f"Profile.extra has known keys {clash}; set the fields instead")
    for key in sorted(profile.extra):
        doc[key] = copy.deepcopy(profile.extra[key])
    errors = validate_profile_dict(doc)
    if errors:
        _raise(errors, f"for model {profile.model!r}")
    return doc


def _effect_to_dict(effect: LengthResidueEffect | None) -> dict[str, Any] | None:
    if effect is None:
        return None
    return dataclass_to_dict(effect, omit_if_none=("n", "note"))


def _window_from_dict(doc: Mapping[str, Any]) -> LocalWindowEffect:
    return LocalWindowEffect(
        accuracy=float(doc["accuracy"]),
        n=doc["n"],
        ci_low=float(doc["ci_low"]),
        ci_high=float(doc["ci_high"]),
        min_distance=doc["min_distance"],
        max_distance=doc["max_distance"],
        source=doc["source"],
    )


# --------------------------------------------------------------------------- text and files


def _format(value: Any, depth: int) -> str:
    """JSON with 2-space indent, but lists of scalars kept on one line."""
    pad, inner = "  " * depth, "  " * (depth + 1)
    if isinstance(value, Mapping):
        if not value:
            return "{}"
        items = (f"{inner}{_scalar(str(k))}: {_format(v, depth + 1)}" for k, v in value.items())
        return "{\n" + ",\n".join(items) + "\n" + pad + "}"
    if isinstance(value, list | tuple):
        if all(not isinstance(v, Mapping | list | tuple) for v in value):
            return "[" + ", ".join(_scalar(v) for v in value) + "]"
        return "[\n" + ",\n".join(inner + _format(v, depth + 1) for v in value) + "\n" + pad + "]"
    return _scalar(value)


def _scalar(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    except ValueError as exc:
        raise ProfileError(f"cannot write {value!r} in a profile: {exc}") from exc


def dumps_profile(profile: Profile) -> str:
    """The profile as deterministic JSON text (stable key order, trailing newline)."""
    return _format(profile_to_dict(profile), 0) + "\n"


def _parse_json(text: str, source: str) -> Any:
    return parse_json_document(
        text,
        source=f"profile {source}",
        error=ProfileError,
        hint="fix the file or re-create it with `phaseaware profile build`",
    )


def loads_profile(text: str, *, source: str = "<string>") -> Profile:
    """Parse JSON ``text`` into a ``Profile`` (NaN/Infinity and duplicate keys rejected)."""
    return profile_from_dict(_parse_json(text, source), source=source)


def _read_text(path: str | os.PathLike[str]) -> str:
    target = Path(path)
    if not os.path.lexists(target):
        raise ProfileNotFoundError(
            f"profile file {target} does not exist; check the path, or run "
            "`phaseaware profile list` to see the registered profiles"
        )
    return read_user_text(target, what="profile file", error=ProfileError)


def load_profile(path: str | os.PathLike[str]) -> Profile:
    """Read and validate the profile file at ``path``."""
    return loads_profile(_read_text(path), source=str(path))


def save_profile(profile: Profile, path: str | os.PathLike[str]) -> Path:
    """Validate and write ``profile`` to ``path`` atomically (the folder must exist)."""
    return atomic_write_text(path, dumps_profile(profile))


def validate_profile_file(path: str | os.PathLike[str]) -> list[str]:
    """Every problem with the profile file at ``path`` (``[]`` when it is valid).

    Unreadable files and invalid JSON are reported as a single message rather
    than raised, so the caller can print them all the same way.
    """
    try:
        doc = _parse_json(_read_text(path), str(path))
    except ProfileError as exc:
        return [str(exc)]
    return validate_profile_dict(doc)
