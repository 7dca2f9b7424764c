#!/usr/bin/env bash
# Configures (does not compile) specdec with SPECDEC_GPU=cuda in a scratch
# directory; exit 77 (skipped) where no CUDA compiler is installed.
# Usage: cuda-configure.sh SOURCE_DIR LLAMA_DIR
set -u
nvcc="$(command -v nvcc || true)"
[ -z "$nvcc" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc=/usr/local/cuda/bin/nvcc
[ -z "$nvcc" ] && { echo "no nvcc: skipped"; exit 77; }
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
if ! cmake -S "$1" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSPECDEC_LLAMA_DIR="$2" -DSPECDEC_GPU=cuda \
        -DSPECDEC_BUILD_TESTS=OFF >"$dir.log" 2>&1; then
    tail -n 40 "$dir.log"; rm -f "$dir.log"; exit 1
fi
grep -q "ggml backends: CPU, CUDA" "$dir.log" && grep -q "CUDA Toolkit found" "$dir.log"
rc=$?
grep -E "specdec: ggml backends|CUDA Toolkit found" "$dir.log"
rm -f "$dir.log"
exit $rc
