#!/usr/bin/env bash
# The GPU check, for a machine with an NVIDIA GPU and the CUDA toolkit:
#   1. builds specdec and llama.cpp with CUDA for the GPUs present, on every core;
#   2. runs the model tier with every layer offloaded (llama.cpp's default,
#      n_gpu_layers = -1, puts every layer on the GPU when there is one);
#   3. benches the exact, mixed and random MTP fixtures with -ngl 99 and writes
#      JSON and Markdown into docs/bench/gpu/.
# Meant to finish within 10 minutes on a 16-core machine (the build takes
# most of it). Environment: SPECDEC_CUDA_ARCHITECTURES (default native).
set -euo pipefail
cd "$(dirname "$0")/.."
export SPECDEC_JOBS="${SPECDEC_JOBS:-$(nproc)}"
build_dir="${SPECDEC_BUILD_DIR:-build-cuda}"
out="docs/bench/gpu"

llama_dir="$(scripts/bootstrap.sh | tail -n 1)"
scripts/build.sh "$build_dir" -DCMAKE_BUILD_TYPE=Release -DSPECDEC_LLAMA_DIR="$llama_dir" -DSPECDEC_GPU=cuda \
    "-DSPECDEC_CUDA_ARCHITECTURES=${SPECDEC_CUDA_ARCHITECTURES:-native}"
"$build_dir/bin/specdec" info | tee "$build_dir/info.txt"
grep -q "(GPU)" "$build_dir/info.txt" || { echo "gpu-check: no GPU device found" >&2; exit 1; }

echo "gpu-check: model tier, every layer on the GPU" >&2
set +e
ctest --test-dir "$build_dir" -L model -j 4 --output-on-failure 2>&1 | tee "$build_dir/ctest-gpu.log" | scripts/ctest-progress.sh gpu-check
rc=${PIPESTATUS[0]}
set -e
[ "$rc" -eq 0 ] || { tail -n 80 "$build_dir/ctest-gpu.log"; exit 1; }
sed -n '/tests passed/,$p' "$build_dir/ctest-gpu.log"

mkdir -p "$out"
cp "$build_dir/info.txt" "$out/device.txt"
for fixture in exact mixed random; do
    echo "gpu-check: bench, $fixture fixture, -ngl 99" >&2
    "$build_dir/bin/specdec" bench --fixture "$fixture" -ngl 99 --n-seq 1 --n-seq 4 \
        --json "$out/$fixture.json" --markdown "$out/$fixture.md"
done
echo "gpu-check: results in $out" >&2
