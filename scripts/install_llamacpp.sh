#!/usr/bin/env bash
# Installs the real llama.cpp server of the `llamacpp` test tier (tests/e2e/llamacpp/):
# llama-cpp-python[server]==0.3.36, built from its sdist with the system compiler (a few
# minutes; pip caches the wheel afterwards), into its own virtual environment so its
# pins never touch the project's. Idempotent: an existing venv with that version is reused.
# Prints the venv's interpreter path on its last line.
#   PHASEAWARE_LLAMACPP_VENV  where the venv lives (default: .venv-llamacpp in the repo root)
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${PHASEAWARE_LLAMACPP_VENV:-.venv-llamacpp}"
py="$venv/bin/python"
pip_q=(--quiet --disable-pip-version-check)
if [ ! -x "$py" ]; then
  python3 -m venv "$venv"
fi
if ! "$py" -m pip show llama-cpp-python 2>/dev/null | grep -qx 'Version: 0.3.36'; then
  "$py" -m pip install "${pip_q[@]}" "llama-cpp-python[server]==0.3.36"
fi
"$py" -c "import llama_cpp.server" >/dev/null
cd "$(dirname "$py")" && echo "$(pwd)/python"
