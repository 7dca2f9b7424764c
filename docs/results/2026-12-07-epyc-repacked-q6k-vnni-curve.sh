#!/bin/bash
# patches/0012 A/B (run as: SCRIPT before q6r). Whole-model verification-cost curve, libggml-cpu builds swapped under one specdec build, alternated.
# /tmp/vnni/lib-before.so: libggml-cpu built with patches 0001-0011; lib-q6r.so: with 0012 too. F is the exact
# Q4_K_M fixture (specdec-fixture glm4moe-mtp F --shape qwen3-0.6b --drafter exact --type q4_k_m). Run from anywhere.
cd /work/main
F=/tmp/sbfix/exact.gguf
for run in 1 2 3; do
  for which in "$@"; do
    cp /tmp/vnni/lib-$which.so build/bin/libggml-cpu.so.0.25.1
    build/bin/specdec bench -m $F --spec mtp --n-draft 8 -n 32 -r 2 -t 2 --curve-rows 16 -q \
      --json /tmp/vnni/curve-$which-$run.json > /tmp/vnni/curve-$which-$run.md 2>&1
    echo "== $which $run $(grep -E '^\| (plain|mtp n=8) ' /tmp/vnni/curve-$which-$run.md | cut -d'|' -f2-4 | tr '\n' ' ')"
    grep "k=0" /tmp/vnni/curve-$which-$run.md
  done
done
cp /tmp/vnni/lib-q6r.so build/bin/libggml-cpu.so.0.25.1
