#!/usr/bin/env bash
# Sets up (scripts/bootstrap.sh), builds and runs the whole test suite.
#   scripts/test.sh              all tiers
#   scripts/test.sh -L unit      only the model-free tier (any ctest arguments pass through)
# Environment: SPECDEC_BUILD_DIR (default build), SPECDEC_JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

llama_dir="$(scripts/bootstrap.sh | tail -n 1)"
build_dir="${SPECDEC_BUILD_DIR:-build}"
jobs="${SPECDEC_JOBS:-$(nproc)}"

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPECDEC_LLAMA_DIR="$llama_dir" >/dev/null
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@"
