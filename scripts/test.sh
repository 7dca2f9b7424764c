#!/usr/bin/env bash
# Sets up (scripts/bootstrap.sh), builds and runs the whole test suite.
#   scripts/test.sh               all tiers
#   scripts/test.sh -L unit       only the model-free tier (ctest arguments pass through)
#   scripts/test.sh --sanitize    the same under AddressSanitizer (with leak checks)
#                                 and UndefinedBehaviorSanitizer, in build-asan
# Environment: SPECDEC_BUILD_DIR (default build or build-asan), SPECDEC_JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

sanitize=""
default_dir="build"
if [ "${1:-}" = "--sanitize" ]; then
    shift
    sanitize="address;undefined"
    default_dir="build-asan"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
    export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
fi

llama_dir="$(scripts/bootstrap.sh | tail -n 1)"
build_dir="${SPECDEC_BUILD_DIR:-$default_dir}"
jobs="${SPECDEC_JOBS:-$(nproc)}"

cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPECDEC_LLAMA_DIR="$llama_dir" \
      "-DSPECDEC_SANITIZE=$sanitize" >/dev/null
cmake --build "$build_dir" -j "$jobs"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@"
