#!/usr/bin/env bash
# Builds llama.cpp's own C++ server (llama-server) for the `llamacpp` test tier: the
# llama.cpp sources vendored in the llama-cpp-python==0.3.36 sdist (from the package index,
# the same llama.cpp the Python server wraps), compiled with the system compiler and cmake
# (a few minutes once; the binary is reused afterwards). No web UI, no downloads at build
# time. Idempotent. Prints the binary's path on its last line.
#   PHASEAWARE_LLAMA_SERVER_DIR  where it is built (default: .llama-server in the repo root)
set -euo pipefail
cd "$(dirname "$0")/.."
version=0.3.36
dir="${PHASEAWARE_LLAMA_SERVER_DIR:-.llama-server}"
bin="$dir/build-$version/bin/llama-server"
if [ ! -x "$bin" ]; then
  command -v cmake >/dev/null || python -m pip install --quiet --disable-pip-version-check cmake
  mkdir -p "$dir"
  if [ ! -d "$dir/llama_cpp_python-$version" ]; then
    python -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
      "llama-cpp-python==$version" -d "$dir" >&2
    tar -xzf "$dir/llama_cpp_python-$version.tar.gz" -C "$dir"
  fi
  src="$dir/llama_cpp_python-$version/vendor/llama.cpp"
  log="$dir/build-$version.log"
  echo "building llama-server $version (a few minutes; log: $log)" >&2
  {
    cmake -S "$src" -B "$dir/build-$version" -DCMAKE_BUILD_TYPE=Release \
      -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF \
      -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_UI=OFF \
      -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=OFF \
      -DBUILD_SHARED_LIBS=OFF &&
      cmake --build "$dir/build-$version" --target llama-server -j "$(nproc)"
  } >"$log" 2>&1 || { tail -40 "$log" >&2; echo "llama-server build failed (log: $log)" >&2; exit 1; }
fi
"$bin" --version >&2
cd "$(dirname "$bin")" && echo "$(pwd)/llama-server"
