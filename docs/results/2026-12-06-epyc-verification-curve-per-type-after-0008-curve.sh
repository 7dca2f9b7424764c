#!/usr/bin/env bash
# The verification-cost curve per weight type, one run each (exact fixture, Qwen3-0.6B shape, one sequence, 2 threads,
# exact kernels), after patches 0006-0008.
set -eu
out=${1:-/tmp/curve}
mkdir -p $out
for t in q4_k_m q6_k q5_k_m iq4_xs q4_0 q8_0; do
  /work/main/build/bin/specdec bench --fixture exact --fixture-type $t --n-draft 4 --curve-rows 16 -n 32 -r 3 -t 2 -q \
    --markdown $out/$t.md --json $out/$t.json > /dev/null
  echo "== $t"; grep -A1 "verification cost" $out/$t.md | tail -1
done
