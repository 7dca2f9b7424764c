#!/usr/bin/env bash
# The near-tie tier's full matrix (tests/model/test-near-ties.cpp, suite
# NearTiesTypes): every weight type llama.cpp's quantizer writes, on the
# dense, MoE and hybrid targets, each at draft lengths 1, 3 and 8, at 1, 2
# and 4 threads, with F16, Q8_0 and Q4_0 KV caches, against each prompt
# decoded alone. CI runs a few types at k = 8, one thread, an F16 cache
# (ctest -R NearTiesTypes); this runs the rest. Hours on 2 cores.
#   scripts/exactness-matrix.sh [BUILD_DIR] [TYPE,TYPE...|all]   (default: build, all)
# Prints a line per cell (gtest's) and the failures' first differing tokens;
# exits 1 when a cell differs.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${1:-build}"
types="${2:-all}"
bin="$build_dir/tests/test-near-ties"
[ -x "$bin" ] || { echo "exactness-matrix: $bin not built (cmake --build $build_dir --target test-near-ties)" >&2; exit 2; }
lscpu | grep -E "^Model name" >&2 || true
echo "exactness-matrix: types $types; CPU kernels: $("$build_dir/bin/specdec" info 2>/dev/null | grep -m1 '^CPU kernels' | sed 's/^CPU kernels: *//' || echo unknown)" >&2
log="$build_dir/exactness-matrix.log"
set +e
SPECDEC_NEAR_TIE_TYPES="$types" SPECDEC_NEAR_TIE_MATRIX=1 \
    "$bin" --gtest_filter='Types/NearTiesTypes.*' >"$log" 2>&1
rc=$?
set -e
grep -E "^\[ +(RUN|OK|FAILED) +\]|Which is|sequence [0-9]|replayed|thread\(s\)" "$log" || true
echo "exactness-matrix: exit $rc (gtest's whole output: $log)" >&2
exit "$rc"
