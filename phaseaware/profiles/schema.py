"""Profile format v1: the schema checks, as messages that name the key and the fix.

``validate_profile_dict(doc)`` returns every problem of a profile document (a
parsed JSON object); ``[]`` means ``profiles.io.profile_from_dict`` will accept
it. Kept apart from ``profiles.io`` so the rules can be read in one place; each
kind of field (fraction, count, int, string, object) has exactly one check.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from datetime import datetime
from typing import Any, TypeGuard

from phaseaware.limits import MAX_PERIOD, MAX_TOKENS
from phaseaware.profiles.model import SCHEMA

__all__ = [
    "EXTRA_KEYS",
    "KEY_ORDER",
    "OPTIONAL_KEYS",
    "REQUIRED_KEYS",
    "SUPPORTED_SCHEMAS",
    "validate_profile_dict",
]

SUPPORTED_SCHEMAS: tuple[str, ...] = (SCHEMA,)

REQUIRED_KEYS = (
    "schema",
    "model",
    "period",
    "residue_accuracy",
    "n",
    "ci_low",
    "ci_high",
    "tokenizer",
    "local_window",
    "provenance",
)
OPTIONAL_KEYS = (
    "compression_stride",
    "length_residue_accuracy",
    "reliability",
    "local_window_accuracy",
)
# Output order of the known keys; extras follow, sorted.
KEY_ORDER = (
    "schema",
    "model",
    "period",
    "compression_stride",
    "local_window",
    "tokenizer",
    "residue_accuracy",
    "n",
    "ci_low",
    "ci_high",
    "reliability",
    "length_residue_accuracy",
    "local_window_accuracy",
    "provenance",
)
# Top-level keys kept in ``Profile.extra``: what calibration records, what
# ``phaseaware score`` records (``score``: the source log, its format, samples; ``lacks``:
# what the eval could not measure, field -> why and how to measure it), and
# ``context_tokens`` (the longest prompt measured, in tokens; bounds local_window).
# Any other key is an error (a typo must not pass silently), except a private
# extension named ``x-...`` or ``x_...``.
EXTRA_KEYS = (
    "context_tokens",
    "lacks",
    "length_stats",
    "period_detection",
    "position_offset",
    "run_fingerprint",
    "score",
    "stats",
    "window_sweep",
)
PROVENANCE_KINDS = ("measured", "published")
LENGTH_KINDS = ("measured", "field-report")
# Accuracy may sit this far outside its interval (rounded bounds in files).
CI_TOLERANCE = 1e-6


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_fraction(key: str, value: object, errors: list[str], *, nullable: bool) -> None:
    if value is None:
        if not nullable:
            errors.append(f"{key}: is null; give a fraction between 0 and 1")
        return
    if not _is_number(value):
        errors.append(f"{key}: expected a number between 0 and 1, got {value!r}")
    elif not math.isfinite(value):
        errors.append(f"{key}: {value!r} is not a finite number; give a fraction between 0 and 1")
    elif not 0.0 <= value <= 1.0:
        errors.append(f"{key}: {value!r} is outside [0, 1]; give a fraction, not a percentage")


def _check_list(key: str, value: object, period: int | None, errors: list[str]) -> bool:
    """True when ``value`` is a list of the right length (``period`` if known)."""
    if not isinstance(value, list):
        errors.append(
            f"{key}: expected a list of one value per residue, got {type(value).__name__}"
        )
        return False
    if period is not None and len(value) != period:
        errors.append(
            f"{key}: has {len(value)} entries but period is {period}; "
            f"give one value per residue 0..{period - 1}"
        )
        return False
    return True


def _check_fraction_list(
    key: str, value: object, period: int | None, errors: list[str], *, nullable: bool
) -> bool:
    if not _check_list(key, value, period, errors):
        return False
    assert isinstance(value, list)
    before = len(errors)
    for r, item in enumerate(value):
        _check_fraction(f"{key}[{r}]", item, errors, nullable=nullable)
    return len(errors) == before


def _check_count_list(key: str, value: object, period: int | None, errors: list[str]) -> bool:
    if not _check_list(key, value, period, errors):
        return False
    assert isinstance(value, list)
    before = len(errors)
    for r, item in enumerate(value):
        if item is not None and not (_is_int(item) and item >= 0):
            errors.append(f"{key}[{r}]: expected a trial count (int >= 0) or null, got {item!r}")
    return len(errors) == before


def _check_int(key: str, value: object, minimum: int, errors: list[str], *, nullable: bool) -> None:
    if value is None and nullable:
        return
    if not (_is_int(value) and value >= minimum):
        what = f"an int >= {minimum} or null" if nullable else f"an int >= {minimum}"
        errors.append(f"{key}: expected {what}, got {value!r}")


def _check_object(
    key: str, value: object, required: tuple[str, ...], optional: tuple[str, ...], errors: list[str]
) -> bool:
    if not isinstance(value, Mapping):
        errors.append(f"{key}: expected an object, got {type(value).__name__}")
        return False
    ok = True
    for name in required:
        if name not in value:
            errors.append(f"{key}: missing key '{name}'; add it (required: {', '.join(required)})")
            ok = False
    allowed = required + optional
    for name in value:
        if name not in allowed:
            errors.append(f"{key}: unknown key '{name}'; allowed keys: {', '.join(allowed)}")
            ok = False
    return ok


def _check_string(key: str, value: object, errors: list[str], *, nullable: bool) -> None:
    if value is None and nullable:
        return
    if not isinstance(value, str) or not value.strip():
        what = "a non-empty string or null" if nullable else "a non-empty string"
        errors.append(f"{key}: expected {what}, got {value!r}")


def _check_tokenizer(value: object, errors: list[str]) -> None:
    if _check_object("tokenizer", value, ("spec", "fingerprint"), (), errors):
        _check_string("tokenizer.spec", value["spec"], errors, nullable=True)  # type: ignore[index]
        _check_string("tokenizer.fingerprint", value["fingerprint"], errors, nullable=True)  # type: ignore[index]


def _check_provenance(value: object, errors: list[str]) -> None:
    keys = ("kind", "source", "protocol", "created", "tool_version")
    if not _check_object("provenance", value, keys, (), errors):
        return
    assert isinstance(value, Mapping)
    if value["kind"] not in PROVENANCE_KINDS:
        errors.append(
            f"provenance.kind: {value['kind']!r} is not one of {', '.join(PROVENANCE_KINDS)}"
        )
    for name in keys[1:]:
        _check_string(f"provenance.{name}", value[name], errors, nullable=False)
    created = value["created"]
    if isinstance(created, str) and created.strip():
        try:
            datetime.fromisoformat(created)
        except ValueError:
            errors.append(
                f"provenance.created: {created!r} is not an ISO 8601 date/time "
                "(e.g. 2025-08-13 or 2025-08-13T12:00:00+00:00)"
            )


def _check_length_effect(value: object, errors: list[str]) -> None:
    key = "length_residue_accuracy"
    required = ("period", "accuracy", "kind", "source")
    if not _check_object(key, value, required, ("n", "note"), errors):
        return
    assert isinstance(value, Mapping)
    period = value["period"]
    if not (_is_int(period) and period >= 1):
        errors.append(f"{key}.period: expected an int >= 1, got {period!r}")
        period = None
    _check_fraction_list(f"{key}.accuracy", value["accuracy"], period, errors, nullable=True)
    if value["kind"] not in LENGTH_KINDS:
        errors.append(f"{key}.kind: {value['kind']!r} is not one of {', '.join(LENGTH_KINDS)}")
    _check_string(f"{key}.source", value["source"], errors, nullable=False)
    if value.get("n") is not None:
        _check_count_list(f"{key}.n", value["n"], period, errors)
    _check_string(f"{key}.note", value.get("note"), errors, nullable=True)


def _check_window_effect(value: object, local_window: object, errors: list[str]) -> None:
    key = "local_window_accuracy"
    fields = ("accuracy", "n", "ci_low", "ci_high", "min_distance", "max_distance", "source")
    if not _check_object(key, value, fields, (), errors):
        return
    assert isinstance(value, Mapping)
    if local_window is None:
        errors.append(
            f"{key} needs local_window (the window's size in tokens); set it or drop {key}"
        )
    before = len(errors)
    for name in ("accuracy", "ci_low", "ci_high"):
        _check_fraction(f"{key}.{name}", value[name], errors, nullable=False)
    for name in ("n", "min_distance", "max_distance"):
        _check_int(f"{key}.{name}", value[name], 0, errors, nullable=False)
    if len(errors) == before:  # the cross-field checks need valid fields
        _check_window_consistency(value, errors)
    _check_string(f"{key}.source", value["source"], errors, nullable=False)


def _check_window_consistency(value: Mapping[str, Any], errors: list[str]) -> None:
    key = "local_window_accuracy"
    if not value["ci_low"] - CI_TOLERANCE <= value["accuracy"] <= value["ci_high"] + CI_TOLERANCE:
        errors.append(
            f"{key}.accuracy {value['accuracy']} lies outside its interval "
            f"[{value['ci_low']}, {value['ci_high']}]"
        )
    elif value["min_distance"] > value["max_distance"]:
        errors.append(f"{key}: min_distance is greater than max_distance; swap them")


def _check_counts(doc: Mapping[str, Any], errors: list[str]) -> None:
    """A residue with 0 trials has no measured accuracy: its count must be given or null."""
    for r, (acc, n) in enumerate(zip(doc["residue_accuracy"], doc["n"], strict=True)):
        if n == 0:
            errors.append(
                f"n[{r}] is 0 trials but residue_accuracy[{r}] is {acc}: an accuracy needs "
                "trials; give the trial count, or null where it is unknown"
            )


def _check_unknown_keys(doc: Mapping[str, Any], errors: list[str]) -> None:
    known = REQUIRED_KEYS + OPTIONAL_KEYS + EXTRA_KEYS
    for key in doc:
        if key in known or (isinstance(key, str) and key.startswith(("x-", "x_"))):
            continue
        near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        errors.append(
            f"unknown key {key!r}{hint}; a profile holds only the keys of schema {SCHEMA} "
            "(name a private extension x-...)"
        )


def _check_window_bound(doc: Mapping[str, Any], errors: list[str]) -> None:
    """local_window (and context_tokens) within the context the profile was measured at."""
    window, context = doc["local_window"], doc.get("context_tokens")
    if context is not None:
        _check_int("context_tokens", context, 1, errors, nullable=False)
        if not _is_int(context) or context > MAX_TOKENS:
            if _is_int(context):
                errors.append(f"context_tokens: {context} is above {MAX_TOKENS} tokens")
            return
    if not _is_int(window):
        return
    if context is not None and window > context:
        errors.append(
            f"local_window: {window} tokens is longer than the {context}-token prompts the "
            "profile was measured at; a window is part of the context (check the number)"
        )
    elif window > MAX_TOKENS:
        errors.append(
            f"local_window: {_digits(window)} is above {MAX_TOKENS} tokens, longer than any "
            "model's context; every position would count as reliable (check the number)"
        )


def _digits(value: int) -> str:
    return str(value) if value < 10**20 else f"an integer of {len(str(value))} digits"


def _check_intervals(doc: Mapping[str, Any], errors: list[str]) -> None:
    """ci_low <= accuracy <= ci_high wherever both bounds are known."""
    rows = zip(doc["residue_accuracy"], doc["ci_low"], doc["ci_high"], strict=True)
    for r, (acc, low, high) in enumerate(rows):
        if low is not None and high is not None and low > high:
            errors.append(f"ci_low[{r}] = {low} is greater than ci_high[{r}] = {high}; swap them")
        elif low is not None and acc < low - CI_TOLERANCE:
            errors.append(f"residue_accuracy[{r}] = {acc} is below its ci_low {low}")
        elif high is not None and acc > high + CI_TOLERANCE:
            errors.append(f"residue_accuracy[{r}] = {acc} is above its ci_high {high}")


def validate_profile_dict(doc: object) -> list[str]:
    """Every problem with a profile document, as messages naming the key; ``[]`` if valid."""
    if not isinstance(doc, Mapping):
        return [f"a profile must be a JSON object, got {type(doc).__name__}"]
    if "schema" not in doc:
        return [f'missing key \'schema\'; add "schema": "{SCHEMA}" (the format version)']
    if doc["schema"] not in SUPPORTED_SCHEMAS:
        return [
            f"schema {doc['schema']!r} is not supported (supported: {', '.join(SUPPORTED_SCHEMAS)}); "
            "upgrade phaseaware or re-create the profile with `phaseaware profile build`"
        ]
    errors = [
        f"missing key '{key}'; add it (use null where unknown)"
        for key in REQUIRED_KEYS
        if key not in doc
    ]
    if errors:
        return errors
    _check_string("model", doc["model"], errors, nullable=False)
    _check_unknown_keys(doc, errors)
    period = doc["period"]
    if not (_is_int(period) and period >= 1):
        errors.append(f"period: expected an int >= 1 (number of residues), got {period!r}")
        period = None
    elif period > MAX_PERIOD:
        errors.append(f"period: {_digits(period)} residues is above the limit {MAX_PERIOD}")
        period = None
    lists_ok = _check_fraction_list(
        "residue_accuracy", doc["residue_accuracy"], period, errors, nullable=False
    )
    lists_ok &= _check_count_list("n", doc["n"], period, errors)
    for key in ("ci_low", "ci_high"):
        lists_ok &= _check_fraction_list(key, doc[key], period, errors, nullable=True)
    if lists_ok and period is not None:
        _check_intervals(doc, errors)
        _check_counts(doc, errors)
    _check_tokenizer(doc["tokenizer"], errors)
    _check_int("local_window", doc["local_window"], 0, errors, nullable=True)
    _check_window_bound(doc, errors)
    _check_provenance(doc["provenance"], errors)
    _check_int("compression_stride", doc.get("compression_stride"), 1, errors, nullable=True)
    if doc.get("reliability") is not None:
        _check_fraction_list("reliability", doc["reliability"], period, errors, nullable=False)
    if doc.get("length_residue_accuracy") is not None:
        _check_length_effect(doc["length_residue_accuracy"], errors)
    if doc.get("local_window_accuracy") is not None:
        _check_window_effect(doc["local_window_accuracy"], doc["local_window"], errors)
    return errors
