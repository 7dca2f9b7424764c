#!/bin/bash
# patches/0008 A/B on one host: libggml-cpu built from the same tree without it
# ("before": 0001-0007) and with it ("after"), swapped under one specdec build,
# alternated, three runs each. Run from the repository root.
out=/tmp/q8-ab
for run in 1 2 3; do
  for which in before after; do
    cp $out/libggml-cpu-$which.so build/bin/libggml-cpu.so.0.25.1
    echo "== $which $run $(date +%T)" >> $out/log
    build/bin/specdec bench --fixture exact --spec mtp --n-draft 1 --n-draft 4 --n-draft 8 -n 48 -r 3 -t 2 --curve-rows 16 \
      --json $out/$which-$run.json --markdown $out/$which-$run.md > $out/$which-$run.txt 2> $out/$which-$run.err
    echo "rc=$? $(date +%T)" >> $out/log
  done
done
cp $out/libggml-cpu-after.so build/bin/libggml-cpu.so.0.25.1
