#!/usr/bin/env bash
# auto against plain decoding at 1, 4 and 16 sequences on the three MTP fixtures (Qwen3-0.6B's shape, Q4_K_M),
# the whole vocabulary against --draft-vocab 32768, alternated.
set -euo pipefail
out=${1:-/tmp/dvs}
mkdir -p $out
for fx in exact mixed random; do
  for dv in 0 32768; do
    /work/main/build/bin/specdec bench -m /tmp/sbfix/qwen3-0.6b-q4_k_m-$fx.gguf --n-draft 1 --n-draft 4 --n-draft auto \
      --n-seq 1 --n-seq 4 --n-seq 16 --draft-vocab $dv -n 48 -r 3 -t 2 -q --markdown $out/$fx-$dv.md --json $out/$fx-$dv.json > /dev/null 2>&1
    echo "== $fx draft-vocab $dv"; grep -E "^\| (plain|mtp|oracle)|^\| [a-z].*\| [0-9]" $out/$fx-$dv.md | head -40
  done
done
