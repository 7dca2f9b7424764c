#!/usr/bin/env bash
# The restricted draft vocabulary end to end: each MTP fixture (Qwen3-0.6B's shape, Q4_K_M, 151,936 tokens),
# the whole vocabulary against --draft-vocab 32768 (the tokenizer's ranking), alternated, two passes.
set -euo pipefail
out=${1:-/tmp/dvb}
mkdir -p $out
for pass in 1 2; do
  for fx in exact mixed random; do
    for dv in 0 32768; do
      /work/main/build/bin/specdec bench -m /tmp/sbfix/qwen3-0.6b-q4_k_m-$fx.gguf --n-draft 1 --n-draft 4 --n-draft 8 --n-draft auto \
        --draft-vocab $dv --speedups-only -n 64 -r 3 -t 2 -q --markdown $out/$fx-$dv-$pass.md --json $out/$fx-$dv-$pass.json > /dev/null 2>&1
      grep -E "^\| (plain|mtp)" $out/$fx-$dv-$pass.md | awk -F'|' -v p=$pass -v f=$fx -v d=$dv '{printf "pass %s %-6s dv=%-5s %-10s %7s tok/s  speedup %s  rounds %s  acceptance %s  draft %s\n", p, f, d, $2, $3, $4, $5, $8, $11}'
    done
  done
done
