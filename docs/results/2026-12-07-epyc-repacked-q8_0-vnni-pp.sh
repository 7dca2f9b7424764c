#!/bin/bash
# patches/0013 A/B (run as: SCRIPT MODEL before q8r). Prompt processing (a ~2,000-token prompt) and plain decoding,
# libggml-cpu builds swapped, alternated. /tmp/q8/lib-before.so: libggml-cpu built with patches 0001-0012;
# lib-q8r.so: with 0013 too. MODEL: the exact Q4_K_M fixture, /tmp/sbfix/exact.gguf, or the Q8_0 one,
# /tmp/q8/exact-q8.gguf (specdec-fixture glm4moe-mtp MODEL --shape qwen3-0.6b --drafter exact --type q4_k_m|q8_0).
# The builds and outputs are in LIBDIR, /tmp/q8 unless set (the 0015 record ran it with LIBDIR=/tmp/p15); the
# last build named is left in place.
cd /work/main
dir=${LIBDIR:-/tmp/q8}
F=$1
shift
tag=$(basename "$F" .gguf)
for run in 1 2; do
  for which in "$@"; do
    cp $dir/lib-$which.so build/bin/libggml-cpu.so.0.25.1
    build/bin/specdec generate -m "$F" --spec none -n 64 -c 4096 -t 2 -f /tmp/attn-ab/long-2000.txt > $dir/pp-$tag-$which-$run.txt 2> $dir/pp-$tag-$which-$run.err
    build/bin/specdec generate -m "$F" --spec none -n 128 -t 2 -p "The quick brown fox" > $dir/dec-$tag-$which-$run.txt 2> $dir/dec-$tag-$which-$run.err
    echo "== $tag $which $run long: $(tail -1 $dir/pp-$tag-$which-$run.err) | short: $(tail -1 $dir/dec-$tag-$which-$run.err)"
  done
done
