"""A missing optional dependency names the extra that installs it, before any work starts."""

from __future__ import annotations

import importlib.util

import pytest

from phaseaware.cli.main import main
from phaseaware.errors import MissingExtraError
from phaseaware.extras import missing_extra_error, require_extra


@pytest.fixture()
def without(monkeypatch):
    """Make ``find_spec`` report the given modules as not installed."""
    real = importlib.util.find_spec

    def hide(*names):
        def find_spec(name, *args, **kwargs):
            return None if name.split(".")[0] in names else real(name, *args, **kwargs)

        monkeypatch.setattr(importlib.util, "find_spec", find_spec)

    return hide


@pytest.mark.parametrize(
    ("argv", "hidden", "extra"),
    [
        (["serve-reference", "--port", "0"], ("uvicorn",), "reference"),
        (["serve-reference", "--port", "0"], ("torch",), "reference"),
        (["demo"], ("torch",), "reference"),
        (["calibrate", "--period", "8"], ("torch",), "torch"),
        (["calibrate", "--period", "8"], ("scipy",), "stats"),
        (["calibrate", "--plan", "--detect-gap", "0.2"], ("scipy",), "stats"),
        (["demo"], ("scipy",), "reference"),
        (["compare", "q.jsonl", "--profile", "p", "--budget-tokens", "100"], ("scipy",), "stats"),
    ],
)
def test_commands_name_the_extra(without, capsys, argv, hidden, extra):
    without(*hidden)
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert f"-e '.[{extra}]'" in err, err
    assert hidden[0] in err and "bug" not in err
    if "torch" in hidden or extra in ("torch", "reference"):  # the CPU build, on any machine
        assert "--extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0" in err


def test_calibrate_plot_checks_matplotlib_before_the_run(without, capsys, tmp_path):
    without("matplotlib")
    plot = tmp_path / "chart.png"
    assert main(["calibrate", "--period", "8", "--plot", str(plot)]) == 1
    err = capsys.readouterr().err
    assert "--plot needs matplotlib" in err and "pip install -e '.[plot]'" in err
    assert list(tmp_path.iterdir()) == []  # nothing was run or written


def test_an_import_failure_met_later_is_taught_too():
    error = missing_extra_error(ModuleNotFoundError("No module named 'uvicorn'", name="uvicorn"))
    assert isinstance(error, MissingExtraError) and "-e '.[serve]'" in str(error)
    assert missing_extra_error(ModuleNotFoundError("x", name="not_an_extra_module")) is None


def test_the_command_line_turns_a_late_import_failure_into_the_extra(monkeypatch, capsys):
    import phaseaware.cli.demo_cmd as demo_cmd

    def run(args):
        raise ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib")

    monkeypatch.setattr(demo_cmd, "run", run)
    import phaseaware.cli.main as cli_main

    parser = cli_main.build_parser()
    monkeypatch.setattr(cli_main, "build_parser", lambda: parser)
    args = parser.parse_args(["demo"])
    monkeypatch.setattr(parser, "parse_args", lambda argv=None: args)
    monkeypatch.setattr(args, "_run", run)
    assert main(["demo"]) == 1
    err = capsys.readouterr().err
    assert "pip install -e '.[plot]'" in err and "bug" not in err


def test_require_extra_passes_when_installed():
    require_extra(modules=("json",), extra="none", what="nothing")
