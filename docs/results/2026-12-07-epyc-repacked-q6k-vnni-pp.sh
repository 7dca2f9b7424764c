#!/bin/bash
# patches/0012 A/B (run as: SCRIPT before q6r). Prompt processing (a ~2,000-token prompt) and plain decoding, libggml-cpu builds swapped, alternated.
# /tmp/vnni/lib-before.so: libggml-cpu built with patches 0001-0011; lib-q6r.so: with 0012 too. F is the exact
# Q4_K_M fixture (specdec-fixture glm4moe-mtp F --shape qwen3-0.6b --drafter exact --type q4_k_m). Run from anywhere.
cd /work/main
F=/tmp/sbfix/exact.gguf
for run in 1 2; do
  for which in "$@"; do
    cp /tmp/vnni/lib-$which.so build/bin/libggml-cpu.so.0.25.1
    build/bin/specdec generate -m $F --spec none -n 64 -c 4096 -t 2 -f /tmp/attn-ab/long-2000.txt > /tmp/vnni/pp-$which-$run.txt 2> /tmp/vnni/pp-$which-$run.err
    build/bin/specdec generate -m $F --spec none -n 128 -t 2 -p "The quick brown fox" > /tmp/vnni/dec-$which-$run.txt 2> /tmp/vnni/dec-$which-$run.err
    echo "== $which $run long: $(tail -1 /tmp/vnni/pp-$which-$run.err) | short: $(tail -1 /tmp/vnni/dec-$which-$run.err)"
  done
done
cp /tmp/vnni/lib-q6r.so build/bin/libggml-cpu.so.0.25.1
