#!/usr/bin/env bash
# Builds the fuzz targets (clang, libFuzzer, ASan+UBSan) against the normal
# build's llama.cpp libraries and runs each on its committed seed corpus for
# a bounded time. Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]  (default 30)
# A crash stops the script with the failing input saved under build-fuzz/.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"

llama_dir="$(scripts/bootstrap.sh | tail -n 1)"
if [ ! -f build/bin/libllama.so ]; then
    scripts/build.sh build -DCMAKE_BUILD_TYPE=Release -DSPECDEC_LLAMA_DIR="$llama_dir"
fi
CC=clang-14 CXX=clang++-14 cmake -S fuzz -B build-fuzz -G Ninja \
    -DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache \
    -DSPECDEC_BUILD_DIR="$PWD/build" -DSPECDEC_LLAMA_DIR="$llama_dir" >/dev/null
echo "fuzz: building the fuzz targets (compiler output: build-fuzz/build.log)" >&2
cmake --build build-fuzz >build-fuzz/build.log 2>&1 || { echo "fuzz: build failed; the end of build-fuzz/build.log:" >&2; tail -n 40 build-fuzz/build.log >&2; exit 1; }

passed=0
for target in state gguf session cli load serve; do
    mkdir -p "build-fuzz/corpus-$target"
    log="build-fuzz/fuzz-$target.log"
    echo "fuzz-$target: running for $seconds s" >&2
    set +e
    dict=""
    if [ -f "fuzz/$target.dict" ]; then
        dict="-dict=../fuzz/$target.dict"
    fi
    (cd build-fuzz && ./fuzz-$target $dict -max_total_time="$seconds" -max_len=4096 -len_control=0 -timeout=10 -print_final_stats=1 \
        "corpus-$target" "../fuzz/corpus/$target") >"$log" 2>&1
    rc=$?
    set -e
    runs=$(grep -E "^stat::number_of_executed_units" "$log" | awk '{print $2}')
    cov=$(grep -E "DONE" "$log" | grep -oE "cov: [0-9]+" | tail -n 1)
    echo "fuzz-$target: ${runs:-0} executions in ${seconds}s, ${cov:-cov: ?}"
    if [ "$rc" -ne 0 ]; then
        echo "fuzz-$target FAILED (exit $rc); the input is saved in build-fuzz/" >&2
        tail -n 40 "$log" >&2
        echo "fuzz: $passed passed, 1 failed"
        exit 1
    fi
    passed=$((passed + 1))
done
echo "fuzz: $passed passed, 0 failed"
