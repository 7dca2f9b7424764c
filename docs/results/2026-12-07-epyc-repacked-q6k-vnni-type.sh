#!/bin/bash
# patches/0012 A/B (run as: SCRIPT before q6r, then RUNS="3 4" SCRIPT before q6r). The Q6_K-type fixture's
# verification-cost curve, libggml-cpu builds swapped, alternated; the libraries as in -curve.sh.
cd /work/main
for run in ${RUNS:-1 2}; do
  for which in "$@"; do
    cp /tmp/vnni/lib-$which.so build/bin/libggml-cpu.so.0.25.1
    build/bin/specdec bench --fixture exact --fixture-type q6_k --spec mtp --n-draft 8 -n 32 -r 2 -t 2 --curve-rows 16 -q \
      --json /tmp/vnni/type-$which-$run.json > /tmp/vnni/type-$which-$run.md 2>&1
    echo "== $which $run $(grep -E '^\| (plain|mtp n=8) ' /tmp/vnni/type-$which-$run.md | cut -d'|' -f2-4 | tr '\n' ' ')"
    grep "k=0" /tmp/vnni/type-$which-$run.md
  done
done
cp /tmp/vnni/lib-q6r.so build/bin/libggml-cpu.so.0.25.1
