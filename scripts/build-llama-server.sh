#!/usr/bin/env bash
# Builds upstream llama.cpp's llama-server from the pinned tree (the one
# scripts/bootstrap.sh fetched, or $SPECDEC_LLAMA_DIR) into a cache directory
# outside the repository, with ccache and the same CPU kernels as specdec's
# build (cmake/cpu-variant.cmake through tools/serve-bench/llama-server).
# The compiler's output goes to BUILD_DIR/build.log. Up to date: seconds.
# Prints the path of the llama-server binary on its last line.
#
# Environment:
#   SPECDEC_LLAMA_DIR         llama.cpp tree (default: scripts/bootstrap.sh's)
#   SPECDEC_CACHE_DIR         default ~/.cache/specdec
#   SPECDEC_CPU               CPU kernels, as for specdec's build (default auto)
#   SPECDEC_LLAMA_SERVER_DIR  build directory (default $SPECDEC_CACHE_DIR/llama-server-$SPECDEC_CPU)
#   SPECDEC_JOBS              parallel jobs (default nproc)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
log() { echo "build-llama-server: $*" >&2; }

llama_dir="$(scripts/bootstrap.sh | tail -n 1)"
cache_dir="${SPECDEC_CACHE_DIR:-$HOME/.cache/specdec}"
cpu="${SPECDEC_CPU:-auto}"
build_dir="${SPECDEC_LLAMA_SERVER_DIR:-$cache_dir/llama-server-$cpu}"
jobs="${SPECDEC_JOBS:-$(nproc)}"
mkdir -p "$build_dir"
build_log="$build_dir/build.log"

start=$(date +%s)
# A cache configured from another checkout of this repository: start it
# again (the objects stay in ccache).
if [ -f "$build_dir/CMakeCache.txt" ] && ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$repo/tools/serve-bench/llama-server" "$build_dir/CMakeCache.txt"; then
    rm -rf "$build_dir/CMakeCache.txt" "$build_dir/CMakeFiles"
fi
if ! cmake -S "$repo/tools/serve-bench/llama-server" -B "$build_dir" -G Ninja \
        -DSPECDEC_LLAMA_DIR="$llama_dir" -DSPECDEC_CPU="$cpu" >"$build_log" 2>&1; then
    log "configuring $build_dir failed; the end of $build_log:"
    tail -n 40 "$build_log" >&2
    exit 1
fi
log "llama.cpp $llama_dir, CPU kernels $(cat "$build_dir/cpu-variant.txt")"
log "compiling llama-server in $build_dir with $jobs jobs (compiler output: $build_log)"
set +e
cmake --build "$build_dir" -j "$jobs" --target llama-server 2>&1 | tee -a "$build_log" | awk '
    /^\[[0-9]+\/[0-9]+\]/ {
        split(substr($1, 2), f, "/"); n = f[1] + 0; total = f[2] + 0
        step = int(total / 10); if (step < 1) step = 1
        if (n % step == 0 || n == total) { printf "build-llama-server: [%d/%d]\n", n, total > "/dev/stderr"; fflush("/dev/stderr") }
    }'
rc=${PIPESTATUS[0]}
set -e
if [ "$rc" -ne 0 ]; then
    log "FAILED (exit $rc); the end of $build_log:"
    tail -n 60 "$build_log" >&2
    exit "$rc"
fi
binary="$build_dir/bin/llama-server"
[ -x "$binary" ] || { log "no binary at $binary"; exit 1; }
log "done in $(( $(date +%s) - start )) s"
echo "$binary"
