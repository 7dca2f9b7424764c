#!/bin/bash
# patches/0012's Q5_K part A/B: lib-q6r.so (0012 with Q6_K only) against lib-q5r.so (with Q5_K too), alternated:
# the exact Q4_K_M fixture (F) and the exact Q5_K_M-type fixture bench generates.
cd /work/main
F=/tmp/sbfix/exact.gguf
for run in 1 2; do
  for which in q6r q5r; do
    cp /tmp/vnni/lib-$which.so build/bin/libggml-cpu.so.0.25.1
    build/bin/specdec bench -m $F --spec mtp --n-draft 8 -n 32 -r 2 -t 2 --curve-rows 16 -q \
      --json /tmp/vnni/q5-m-$which-$run.json > /tmp/vnni/q5-m-$which-$run.md 2>&1
    echo "== Q4_K_M $which $run $(grep -E '^\| (plain|mtp n=8) ' /tmp/vnni/q5-m-$which-$run.md | cut -d'|' -f2-4 | tr '\n' ' ')"
    grep "k=0" /tmp/vnni/q5-m-$which-$run.md
    build/bin/specdec bench --fixture exact --fixture-type q5_k_m --spec mtp --n-draft 8 -n 32 -r 2 -t 2 --curve-rows 16 -q \
      --json /tmp/vnni/q5-t-$which-$run.json > /tmp/vnni/q5-t-$which-$run.md 2>&1
    echo "== Q5_K_M $which $run $(grep -E '^\| (plain|mtp n=8) ' /tmp/vnni/q5-t-$which-$run.md | cut -d'|' -f2-4 | tr '\n' ' ')"
    grep "k=0" /tmp/vnni/q5-t-$which-$run.md
  done
done
cp /tmp/vnni/lib-q5r.so build/bin/libggml-cpu.so.0.25.1
