#!/bin/bash
# patches/0010's two parts apart: "chains" (the few-row attention loops in independent chains, the
# tiles as before: one head's positions, or a decoded position's heads of one KV group) against
# "after" (the whole patch: every tile takes the heads of one KV group), verification-cost curve
# after the 2,000-token prompt of ab.sh, alternated, two runs each. Run from the repository root.
out=/tmp/attn-ab
F=${F:-/tmp/sbfix/exact.gguf}
for run in 1 2; do
  for which in chains after; do
    cp $out/libggml-cpu-$which.so build/bin/libggml-cpu.so.0.25.1
    echo "== group $which $run $(date +%T)" >> $out/log
    build/bin/specdec bench -m $F --spec mtp --n-draft 8 -n 16 -r 1 -t 2 --curve-rows 16 -c 4096 -f $out/long-2000.txt -q \
      --json $out/group-$which-$run.json > $out/group-$which-$run.md 2>> $out/log
  done
done
cp $out/libggml-cpu-after.so build/bin/libggml-cpu.so.0.25.1
