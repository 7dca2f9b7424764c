#!/bin/bash
# alternate new/old per fixture
out=/tmp/bench-out; mkdir -p $out
for F in exact mixed random; do
  for which in new old; do
    if [ $which = new ]; then B=/work/main/build/bin/specdec; else B=/tmp/oldtree/build/bin/specdec; fi
    echo "== $F $which $(date +%T)" >> $out/log
    $B bench --fixture $F --n-draft 1 --n-draft 4 --n-draft auto --n-seq 1 --n-seq 4 --n-seq 16 -n 48 -r 3 -t 2 --json $out/$F-$which.json --markdown $out/$F-$which.md > $out/$F-$which.txt 2>$out/$F-$which.err
    echo "rc=$? $(date +%T)" >> $out/log
  done
done
