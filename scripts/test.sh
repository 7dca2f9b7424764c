#!/usr/bin/env bash
# Sets up (scripts/bootstrap.sh), builds and runs the whole test suite.
#   scripts/test.sh               all tiers
#   scripts/test.sh -L unit       only the model-free tier (ctest arguments pass through)
#   scripts/test.sh --sanitize    the same under AddressSanitizer (with leak checks)
#                                 and UndefinedBehaviorSanitizer, in build-asan
# Environment: SPECDEC_BUILD_DIR (default build or build-asan), SPECDEC_JOBS (default nproc),
# SPECDEC_CPU (CPU kernels, see README).
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

scripts/build.sh "$build_dir" -DCMAKE_BUILD_TYPE=Release -DSPECDEC_LLAMA_DIR="$llama_dir" "-DSPECDEC_SANITIZE=$sanitize"
# Each test's line goes to the log; the terminal gets progress (tests done,
# the ones running), failures as they happen, and the summary.
ctest_log="$build_dir/ctest.log"
echo "test: running the tests in $build_dir (every test's output: $ctest_log)" >&2
set +e
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs" "$@" 2>&1 | tee "$ctest_log" | scripts/ctest-progress.sh test
rc=${PIPESTATUS[0]}
set -e
grep -E "\*\*\*(Failed|Exception|Timeout)|Not Run" "$ctest_log" || true
sed -n '/tests passed\|No tests were found/,$p' "$ctest_log"
if [ "$rc" -ne 0 ]; then
    echo "test: FAILED; the failing tests' output is in $ctest_log; its last 150 lines:" >&2
    tail -n 150 "$ctest_log" >&2
fi
exit "$rc"
