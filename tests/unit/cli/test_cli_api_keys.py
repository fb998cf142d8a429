"""The shared --api-key-file / --api-key / env reader behind serve-reference, calibrate, probe-endpoint."""

from __future__ import annotations

import argparse

import pytest

from phaseaware.cli.api_keys import api_key_from_args, read_key_file
from phaseaware.errors import CalibrationError, InputError


def _args(key_file=None, key=None):
    return argparse.Namespace(api_key_file=key_file, api_key=key)


def test_key_file_is_stripped(tmp_path):
    path = tmp_path / "key"
    path.write_text("  sk-test\n", encoding="utf-8")
    got = api_key_from_args(_args(str(path)), error=InputError, env_name="X_KEY", read_env=True)
    assert got == "sk-test"


def test_empty_key_file_raises_the_callers_error(tmp_path):
    path = tmp_path / "key"
    path.write_text("\n", encoding="utf-8")
    with pytest.raises(CalibrationError, match="is empty"):
        api_key_from_args(_args(str(path)), error=CalibrationError, env_name="X", read_env=False)


def test_unreadable_key_file_is_a_typed_error(tmp_path):
    with pytest.raises(InputError, match="--api-key-file"):
        read_key_file(str(tmp_path / "missing"), error=InputError)
    bad = tmp_path / "bad"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="--api-key-file"):
        read_key_file(str(bad), error=InputError)


def test_flag_warns_and_env_only_when_asked(monkeypatch, capsys):
    monkeypatch.setenv("X_KEY", "from-env")
    assert (
        api_key_from_args(_args(key="k"), error=InputError, env_name="X_KEY", read_env=True) == "k"
    )
    assert "visible to other users" in capsys.readouterr().err
    assert (
        api_key_from_args(_args(), error=InputError, env_name="X_KEY", read_env=True) == "from-env"
    )
    assert api_key_from_args(_args(), error=InputError, env_name="X_KEY", read_env=False) is None
