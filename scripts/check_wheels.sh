#!/usr/bin/env bash
# Builds the wheels of the five packages (core, langchain-phaseaware,
# llama-index-postprocessor-phaseaware, llama-index-llms-phaseaware, phaseaware-haystack) and
# checks them the way a release would be: each installed from its wheel (core from its wheel
# too, never from the source tree) into a fresh venv, imported from there, with `pip check` on
# the declared dependencies.
#
# Fast and offline: the wheels are built without build isolation (the running Python's
# setuptools; hatchling for phaseaware-haystack), installed with --no-index --no-deps from
# the local wheel folder, and the fresh venv reads the third-party dependencies (numpy,
# langchain-core, llama-index-core, haystack-ai, ...) from the running environment's
# site-packages through a .pth path line, which adds no editable-install hooks (.pth files
# are only run in site dirs), so the phaseaware packages can only come from the wheels.
# Usage: scripts/check_wheels.sh [WHEEL_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."

wheels="${1:-$(mktemp -d)}"
mkdir -p "$wheels"
venv="$(mktemp -d)/venv"
# Built out of the working tree: a copy of the tracked and untracked-but-not-ignored files
# (so no build/ or egg-info lands in the clone, and a module deleted since cannot ship).
src="$(mktemp -d)"
trap 'rm -rf "$(dirname "$venv")" "$src"' EXIT
git ls-files -z --cached --others --exclude-standard | while IFS= read -r -d '' f; do
  if [ -f "$f" ]; then printf '%s\0' "$f"; fi
done | xargs -0 cp --parents -t "$src"
for pkg in . integrations/langchain integrations/llama-index integrations/llama-index-llms \
  integrations/haystack; do
  python -m build --wheel --no-isolation --outdir "$wheels" "$src/$pkg" >"$wheels/build.log" 2>&1 \
    || { tail -30 "$wheels/build.log"; exit 1; }
done

python -m venv "$venv"
deps="$(python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
plat="$(python -c 'import sysconfig; print(sysconfig.get_paths()["platlib"])')"
inner="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
printf '%s\n%s\n' "$deps" "$plat" >"$inner/zz-test-environment-deps.pth"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-index --no-deps \
  "$wheels"/phaseaware-*.whl "$wheels"/langchain_phaseaware-*.whl \
  "$wheels"/llama_index_postprocessor_phaseaware-*.whl "$wheels"/llama_index_llms_phaseaware-*.whl \
  "$wheels"/phaseaware_haystack-*.whl
# the wheels' declared dependencies must be met (other packages' conflicts are not ours)
problems="$("$venv/bin/python" -m pip check --disable-pip-version-check 2>&1 | grep -i phaseaware || true)"
if [ -n "$problems" ]; then echo "$problems"; exit 1; fi
cd "$(dirname "$venv")"  # not the source tree: imports must come from the wheels
"$venv/bin/python" - "$inner" <<'PY'
import sys
from pathlib import Path

inner = sys.argv[1]
import haystack_integrations.components.builders.phaseaware as hsb
import haystack_integrations.components.rankers.phaseaware as hsr
import haystack_integrations.components.validators.phaseaware as hsv
import haystack_integrations.utils.phaseaware as hsu
import langchain_phaseaware
import llama_index.llms.phaseaware as lil
import llama_index.postprocessor.phaseaware as li
import phaseaware
from phaseaware.tokenizers.registry import REFERENCE_MODEL_DIR

for module in (phaseaware, langchain_phaseaware, li, lil, hsb, hsr, hsv, hsu):
    assert module.__file__.startswith(inner), (module.__name__, module.__file__, inner)
    print(f"{module.__name__}: {module.__file__}")
assert (REFERENCE_MODEL_DIR / "chat_template.jinja").is_file(), "package data missing"
assert langchain_phaseaware.PhaseAwarePrompt and li.PhaseAwarePostprocessor
assert lil.PhaseAwareAgentLLM
assert hsb.PhaseAwareChatPromptBuilder and hsr.PhaseAwareRanker and hsv.PhaseAwareUsageCheck
for typed in (hsb, hsr, hsv, hsu):  # py.typed in every namespace leaf
    assert (Path(typed.__file__).parent / "py.typed").is_file(), typed
print("wheels OK")
PY
