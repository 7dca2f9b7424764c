#!/bin/bash
# patches/0012 A/B: whole-model verification-cost curves, libggml-cpu builds swapped under one specdec build,
# alternated. The builds are LIBDIR/lib-NAME.so, the outputs LIBDIR/curve-TYPE-NAME-RUN.{json,md}; LIBDIR is
# /tmp/vnni unless set (the 0013 and 0014 records ran this script with LIBDIR=/tmp/q8). /tmp/vnni/lib-before.so:
# libggml-cpu built with patches 0001-0011; lib-q6r.so: with 0012's Q6_K part; lib-q5r.so: with the whole of 0012. F is the exact Q4_K_M fixture (specdec-fixture glm4moe-mtp F --shape
# qwen3-0.6b --drafter exact --type q4_k_m). What ran, in order:
#   SCRIPT q4_k_m "1 2 3" before q6r       (the Q4_K_M fixture)
#   SCRIPT q6_k "1 2" before q6r; SCRIPT q6_k "3 4" before q6r   (bench's Q6_K fixture)
#   SCRIPT q4_k_m "1 2" q6r q5r; SCRIPT q5_k_m "1 2" q6r q5r     (interleaved per run in the record's last runs)
cd /work/main
dir=${LIBDIR:-/tmp/vnni}
F=/tmp/sbfix/exact.gguf
type=$1 runs=$2
shift 2
if [ "$type" = q4_k_m ]; then model=(-m "$F"); else model=(--fixture exact --fixture-type "$type"); fi
for run in $runs; do
  for which in "$@"; do
    cp $dir/lib-$which.so build/bin/libggml-cpu.so.0.25.1
    out=$dir/curve-$type-$which-$run
    build/bin/specdec bench "${model[@]}" --spec mtp --n-draft 8 -n 32 -r 2 -t 2 --curve-rows 16 -q --json $out.json > $out.md 2>&1
    echo "== $type $which $run $(grep -E '^\| (plain|mtp n=8) ' $out.md | cut -d'|' -f2-4 | tr '\n' ' ')"
    grep "k=0" $out.md
  done
done
