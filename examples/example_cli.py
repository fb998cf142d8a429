"""What every example shares: its flags, how it fails, its server and its profile.

``needs(framework)`` wraps an example's imports: a missing package ends the example with
exit 1 and one line naming the package, its install command (``phaseaware.extras``, the
same the command line prints) and the README's one install line for the framework.
``example_parser`` gives every example ``--help``, ``--base-url`` and ``--profile``;
``served(args)`` checks a given ``--base-url`` within 3 s (before any slow work) or starts
``phaseaware serve-reference``; ``reference_profile`` reads ``--profile`` (default: the
profile ``phaseaware demo`` wrote, when it exists) or calibrates the reference model in a
temporary folder that is removed afterwards (``reference_profile_file``: the same as a
path, for components that take one). ``run(main)`` wraps ``main``: a server that
cannot be reached, or any phaseaware error, is one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

from phaseaware.extras import TORCH_CPU, install_command

__all__ = [
    "DEMO_PROFILE",
    "INSTALL",
    "MODEL",
    "example_parser",
    "needs",
    "preflight",
    "reference_profile",
    "reference_profile_file",
    "run",
    "served",
]

MODEL = "phaseaware-reference"
#: Where `phaseaware demo` (run in the same folder) writes the reference model's profile.
DEMO_PROFILE = Path("phaseaware-demo") / f"{MODEL}.json"
#: The README's one install line per framework (from the root of a clone): everything its
#: examples import, the reference model (CPU torch) and the `deepseek-v4` tokenizer of the
#: framework snippets. A test checks the README quotes these lines.
INSTALL = {
    "langchain": f'pip install {TORCH_CPU} -e ".[reference,deepseek]" '
    '-e "integrations/langchain[examples]"',
    "llama-index": f'pip install {TORCH_CPU} -e ".[reference,deepseek]" '
    '-e "integrations/llama-index[examples]" -e integrations/llama-index-llms',
    "haystack": f'pip install {TORCH_CPU} -e ".[reference,deepseek]" -e integrations/haystack',
}
#: Seconds a given --base-url has to answer before the example gives up.
CONNECT_TIMEOUT = 3.0


def _fail(message: str) -> None:
    print(f"{sys.argv[0] or 'example'}: {message}", file=sys.stderr)
    raise SystemExit(1)


def _missing(name: str, framework: str | None) -> str:
    everything = f"; everything its examples need: {INSTALL[framework]}" if framework else ""
    return f"this example needs {name}, which is not installed: {install_command(name)}{everything}"


@contextmanager
def needs(framework: str | None = None) -> Iterator[None]:
    """Around an example's imports: a missing package is one line naming its install."""
    try:
        yield
    except ModuleNotFoundError as exc:
        _fail(_missing(exc.name or str(exc), framework))


def example_parser(doc: str, *, profile: bool = True) -> argparse.ArgumentParser:
    """``--help`` from the example's docstring; ``--base-url`` and ``--profile``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0], allow_abbrev=False)
    parser.add_argument(
        "--base-url",
        help="a running `phaseaware serve-reference` (e.g. http://127.0.0.1:8000/v1); "
        "default: start one on a free port",
    )
    if profile:
        parser.add_argument(
            "--profile",
            help="the reference model's profile; default: the one `phaseaware demo` wrote "
            f"({DEMO_PROFILE}) when it exists, else a quick calibration (~30 s)",
        )
    return parser


def preflight() -> None:
    """Before an example's imports (seconds of them): a ``--base-url`` on the command line
    that nothing answers ends the example at once (3 s at most)."""
    early = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    early.add_argument("--base-url")
    known, _ = early.parse_known_args()
    if known.base_url and not {"-h", "--help"} & set(sys.argv[1:]):
        check_server(known.base_url)


def served(args: argparse.Namespace) -> AbstractContextManager[str]:
    """The server's base URL: ``--base-url`` once it answers (3 s), else one started here."""
    if args.base_url:
        check_server(args.base_url)
        return nullcontext(args.base_url)
    from reference_server import reference_server

    return reference_server()


def check_server(base_url: str) -> None:
    """Any HTTP answer from ``base_url``/models within 3 s, else one line and exit 1."""
    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/models", timeout=CONNECT_TIMEOUT):
            return
    except urllib.error.HTTPError:
        return  # it answered: a server is there
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        _fail(f"cannot reach the model server at {base_url} ({reason}): {_START_ONE}")


_START_ONE = (
    "start one with `phaseaware serve-reference --port 8000` and pass "
    "--base-url http://127.0.0.1:8000/v1, or leave out --base-url to let the example start it"
)


def reference_profile(path: str | None) -> Any:
    """The given profile, else the demo's (when it exists), else a quick calibration of the
    reference model (~15-30 s) in a temporary folder removed afterwards."""
    from phaseaware.profiles.io import load_profile

    with reference_profile_file(path) as file:
        return load_profile(Path(file))


@contextmanager
def reference_profile_file(path: str | None) -> Iterator[str]:
    """As :func:`reference_profile`, the profile's file, for components that take a path
    (Haystack's serialise theirs): a calibrated one lives in a temporary folder that is
    removed when the block ends."""
    if path:
        yield path
        return
    if DEMO_PROFILE.is_file():
        print(f"using the profile `phaseaware demo` wrote: {DEMO_PROFILE}", file=sys.stderr)
        yield str(DEMO_PROFILE)
        return
    with tempfile.TemporaryDirectory(prefix="phaseaware-example-") as folder:
        yield str(_calibrate(Path(folder)))


def _calibrate(out: Path) -> Path:
    """Calibrate the reference model quickly; the profile's path (in ``out``)."""
    from phaseaware.calibration.backends.hf import load_hf_backend
    from phaseaware.calibration.runner import calibrate
    from phaseaware.chat import conversation_layout
    from phaseaware.demo.run import DemoSettings
    from phaseaware.reference.load import reference_model_source
    from phaseaware.tokenizers import load_tokenizer

    print(
        "calibrating the reference model (~30 s; `phaseaware demo` or --profile FILE skips it)",
        file=sys.stderr,
    )
    tokenizer = load_tokenizer("reference")
    backend = load_hf_backend(reference_model_source(), tokenizer, threads=1)
    profile_path = out / f"{MODEL}.json"
    try:
        calibrate(
            backend=backend,
            tokenizer=tokenizer,
            layout=conversation_layout(tokenizer=tokenizer, chat_format="hf"),
            settings=DemoSettings(base_prompts=12).probe_settings(),
            model=MODEL,
            chat_format="hf",
            log_path=out / "calibration.jsonl",
            period=8,
            out_path=profile_path,
        )
    finally:
        backend.close()
    return profile_path


def run(main: Callable[[], int]) -> int:
    """Call ``main``; a missing server, package or phaseaware error is one line, exit 1."""
    try:
        return main()
    except ModuleNotFoundError as exc:  # a lazy import inside phaseaware or a framework
        _fail(_missing(exc.name or str(exc), None))
    except KeyboardInterrupt:
        _fail("interrupted")
    except Exception as exc:
        _fail(_one_line(exc))
    return 1  # not reached


def _one_line(exc: BaseException) -> str:
    from phaseaware.errors import PhaseawareError

    if isinstance(exc, PhaseawareError):
        return str(exc).splitlines()[0]
    cause: BaseException | None = exc
    while cause is not None:  # frameworks wrap the client's connection error
        if type(cause).__name__ in ("APIConnectionError", "ConnectError", "ConnectionError"):
            return (
                f"cannot reach the model server (connection refused or no such host): {_START_ONE}"
            )
        if type(cause).__name__ == "APIStatusError" or hasattr(cause, "status_code"):
            return f"the server refused the request: {str(cause).splitlines()[0]}"
        cause = cause.__cause__ or cause.__context__
    return f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
