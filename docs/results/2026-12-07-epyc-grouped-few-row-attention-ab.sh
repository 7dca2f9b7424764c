#!/bin/bash
# patches/0010 A/B on one host: libggml-cpu built from the same tree without 0010 ("before":
# 0001-0009) and with it ("after"), swapped under one specdec build, alternated. Long prompts of
# random common English words (fixed seed; about 2,000 and 3,800 tokens with the fixture's
# tokenizer) decoded plainly, and bench's verification-cost curve after the 2,000-token one and
# after bench's default short prompt. Run from the repository root; F is the exact Q4_K_M
# fixture (specdec-fixture glm4moe-mtp F --shape qwen3-0.6b --drafter exact --type q4_k_m).
out=/tmp/attn-ab
F=${F:-/tmp/sbfix/exact.gguf}
python3 - "$out" <<'PY'
import random, sys
random.seed(1)
w = ('the of and to in a is that for it as was with be by on not he this are or his from at which but have an '
     'they you were her she there been one all we their has would when if so no will more can').split()
text = ' '.join(random.choice(w) for _ in range(1700))
open(sys.argv[1] + '/long-3800.txt', 'w').write(text)
open(sys.argv[1] + '/long-2000.txt', 'w').write(text[:4700])
PY
for run in 1 2; do
  for which in before after; do
    cp $out/libggml-cpu-$which.so build/bin/libggml-cpu.so.0.25.1
    for ctx in 2000 3800; do
      echo "== plain $which $run ctx $ctx $(date +%T)" >> $out/log
      build/bin/specdec generate -m $F --spec none -n 64 -c 4096 -t 2 -f $out/long-$ctx.txt \
        > $out/plain-$which-$run-$ctx.txt 2> $out/plain-$which-$run-$ctx.err
      tail -1 $out/plain-$which-$run-$ctx.err >> $out/log
    done
    echo "== bench long $which $run $(date +%T)" >> $out/log
    build/bin/specdec bench -m $F --spec mtp --n-draft 8 -n 16 -r 1 -t 2 --curve-rows 16 -c 4096 -f $out/long-2000.txt -q \
      --json $out/long-$which-$run.json > $out/long-$which-$run.md 2>> $out/log
    echo "== bench short $which $run $(date +%T)" >> $out/log
    build/bin/specdec bench -m $F --spec mtp --n-draft 8 -n 32 -r 2 -t 2 --curve-rows 16 -q \
      --json $out/short-$which-$run.json > $out/short-$which-$run.md 2>> $out/log
  done
done
cp $out/libggml-cpu-after.so build/bin/libggml-cpu.so.0.25.1
