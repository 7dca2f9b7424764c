#!/bin/bash
# patches/0013 A/B: whole-model verification-cost curves, libggml-cpu builds swapped under one specdec build,
# alternated. /tmp/q8/lib-before.so: libggml-cpu built with patches 0001-0012; lib-q8r.so: with 0013 too. F is the
# exact Q4_K_M fixture (specdec-fixture glm4moe-mtp F --shape qwen3-0.6b --drafter exact --type q4_k_m); q8_0 is
# bench's own fixture of that type. What ran, in order:
#   SCRIPT q4_k_m "1 2" before q8r; SCRIPT q8_0 "1 2" before q8r
cd /work/main
F=/tmp/sbfix/exact.gguf
type=$1 runs=$2
shift 2
if [ "$type" = q4_k_m ]; then model=(-m "$F"); else model=(--fixture exact --fixture-type "$type"); fi
for run in $runs; do
  for which in "$@"; do
    cp /tmp/q8/lib-$which.so build/bin/libggml-cpu.so.0.25.1
    out=/tmp/q8/curve-$type-$which-$run
    build/bin/specdec bench "${model[@]}" --spec mtp --n-draft 8 -n 32 -r 2 -t 2 --curve-rows 16 -q --json $out.json > $out.md 2>&1
    echo "== $type $which $run $(grep -E '^\| (plain|mtp n=8) ' $out.md | cut -d'|' -f2-4 | tr '\n' ' ')"
    grep "k=0" $out.md
  done
done
