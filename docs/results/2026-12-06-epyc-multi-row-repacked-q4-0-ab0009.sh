#!/usr/bin/env bash
# patches/0009 A/B on the exact Q4_0 fixture: the CPU backend built without it, then with it, alternated twice;
# one bench run each (V(r) for r = 1..8, MTP n = 1 and n = 4, plain decoding).
set -eu
T=$HOME/.cache/specdec/llama.cpp-v0.5.0
out=${1:-/tmp/ab0009}
mkdir -p $out
files="ggml/src/ggml-cpu/repack.cpp ggml/src/ggml-cpu/repack.h ggml/src/ggml-cpu/arch/x86/repack.cpp"
for i in 1 2; do
  for v in base0009 with0009; do
    for f in $files; do cp /tmp/$v/$f $T/$f; done
    cmake --build /work/main/build --target specdec-cli -j2 > /dev/null
    /work/main/build/bin/specdec bench --fixture exact --fixture-type q4_0 --n-draft 1 --n-draft 4 --curve-rows 8 -n 32 -r 3 -t 2 -q \
      --json $out/$v-$i.json --markdown $out/$v-$i.md > /dev/null
    echo "$v run $i done"
  done
done
