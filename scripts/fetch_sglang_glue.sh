#!/usr/bin/env bash
# The SGLang tier (tests/e2e/sglang) reads SGLang's own DeepSeek glue: two files of the
# sglang==0.5.23 wheel, downloaded with --no-deps and never installed (SGLang needs a GPU).
# Unzips just those files into .cache/sglang-0.5.23 (or $PHASEAWARE_SGLANG_GLUE) once and
# prints the folder on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.5.23
dest="${PHASEAWARE_SGLANG_GLUE:-.cache/sglang-$version}"
files=(
  sglang/srt/parser/deepseek_recipe_renderer.py
  sglang/srt/entrypoints/openai/serving_deepseek_recipe.py
)
if [ ! -f "$dest/${files[0]}" ] || [ ! -f "$dest/${files[1]}" ]; then
  wheels="$(mktemp -d)"
  trap 'rm -rf "$wheels"' EXIT
  python -m pip download --quiet --disable-pip-version-check --no-deps \
    "sglang==$version" -d "$wheels" >&2
  python - "$wheels" "$dest" "${files[@]}" <<'PY'
import sys
import zipfile
from pathlib import Path

wheels, dest, *names = sys.argv[1:]
(wheel,) = Path(wheels).glob("sglang-*.whl")
with zipfile.ZipFile(wheel) as archive:
    for name in names:
        target = Path(dest) / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(archive.read(name))
PY
fi
echo "$dest"
