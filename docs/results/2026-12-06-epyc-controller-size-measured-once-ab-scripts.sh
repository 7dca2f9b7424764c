#!/bin/bash
# auto at 1, 4 and 16 sequences on the three MTP fixtures: the controller before (old) and after (new) the change, alternated per fixture
out=${1:-/tmp/ab}; mkdir -p $out
for F in exact mixed random; do
  for which in old new; do
    if [ $which = new ]; then B=/work/main/build/bin/specdec; L=; else B=/tmp/old/specdec; L=/tmp/old; fi
    echo "== $F $which $(date +%T)" >> $out/log
    LD_LIBRARY_PATH=$L $B bench --fixture $F --n-draft auto --n-seq 1 --n-seq 4 --n-seq 16 -n 48 -r 3 -t 2 -q --json $out/$F-$which.json --markdown $out/$F-$which.md > /dev/null 2>$out/$F-$which.err
    echo "rc=$? $(date +%T)" >> $out/log
  done
done
#!/bin/bash
# exact head, auto at 4 and 16 sequences: before (old) and after (new), alternated, two runs each
out=${1:-/tmp/ab2}; mkdir -p $out
for i in 1 2; do
  for which in old new; do
    if [ $which = new ]; then B=/work/main/build/bin/specdec; L=; else B=/tmp/old/specdec; L=/tmp/old; fi
    LD_LIBRARY_PATH=$L $B bench --fixture exact --n-draft auto --n-seq 4 --n-seq 16 -n 48 -r 3 -t 2 -q --json $out/exact-$which-$i.json > /dev/null 2>$out/exact-$which-$i.err
    echo "$which $i rc=$? $(date +%T)" >> $out/log
  done
done
