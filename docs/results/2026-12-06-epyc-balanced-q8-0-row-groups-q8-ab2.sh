#!/bin/bash
# patches/0008 A/B, second series: the same two libggml-cpu builds as q8-ab.sh, shorter runs,
# alternated four times each. Run from the repository root.
out=/tmp/q8-ab2
for run in 1 2 3 4; do
  for which in before after; do
    cp $out/libggml-cpu-$which.so build/bin/libggml-cpu.so.0.25.1
    echo "== $which $run $(date +%T)" >> $out/log
    build/bin/specdec bench -m /tmp/exact-q4km.gguf --spec mtp --n-draft 4 --n-draft 8 -n 32 -r 2 -t 2 --curve-rows 9 \
      --json $out/$which-$run.json > $out/$which-$run.txt 2> $out/$which-$run.err
    echo "rc=$? $(date +%T)" >> $out/log
  done
done
cp $out/libggml-cpu-after.so build/bin/libggml-cpu.so.0.25.1
