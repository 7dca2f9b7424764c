#!/usr/bin/env bash
# Configures and builds specdec (and llama.cpp with it) quietly: the
# compiler's output goes to BUILD_DIR/build.log; the terminal gets progress
# lines and specdec's own warnings, and the log's tail when the build fails.
#   scripts/build.sh BUILD_DIR [CMAKE_ARG...] [-- TARGET...]
# Environment: SPECDEC_JOBS (default nproc); SPECDEC_CPU (CPU kernels, see
# docs/cpu-kernels.md): when set, passed to CMake before CMAKE_ARG, so that
# it also replaces what an existing BUILD_DIR was configured with.
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
build_dir="$1"; shift
cmake_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do cmake_args+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
targets=()
[ $# -gt 0 ] && targets=(--target "$@")
jobs="${SPECDEC_JOBS:-$(nproc)}"

mkdir -p "$build_dir"
log="$build_dir/build.log"
start=$(date +%s)
cpu_args=()
[ -n "${SPECDEC_CPU:-}" ] && cpu_args=("-DSPECDEC_CPU=$SPECDEC_CPU")
if ! cmake -S . -B "$build_dir" -G Ninja "${cpu_args[@]}" "${cmake_args[@]}" >"$log" 2>&1; then
    echo "build: configuring $build_dir failed; the end of $log:" >&2
    tail -n 40 "$log" >&2
    exit 1
fi
grep -E "^-- specdec:|^CMake Warning" "$log" | sed 's/^-- /build: /' >&2 || true
echo "build: compiling in $build_dir with $jobs jobs (compiler output: $log)" >&2
set +e
# Progress every tenth of the steps; every warning or error in specdec's own
# sources (llama.cpp's are in the log only).
cmake --build "$build_dir" -j "$jobs" "${targets[@]}" 2>&1 | tee -a "$log" | awk -v repo="$repo/" '
    /^\[[0-9]+\/[0-9]+\]/ {
        split(substr($1, 2), f, "/"); n = f[1] + 0; total = f[2] + 0
        step = int(total / 10); if (step < 1) step = 1
        if (n % step == 0 || n == total) { printf "build: [%d/%d]\n", n, total > "/dev/stderr"; fflush("/dev/stderr") }
        next
    }
    index($0, repo) == 1 && /(warning|error):/ { print "build: " substr($0, length(repo) + 1) > "/dev/stderr" }
'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
    echo "build: FAILED (exit $rc); the end of $log:" >&2
    tail -n 60 "$log" >&2
    exit "$rc"
fi
echo "build: done in $(( $(date +%s) - start )) s" >&2
