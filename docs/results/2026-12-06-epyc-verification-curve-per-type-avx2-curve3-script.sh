#!/usr/bin/env bash
# The verification-cost curve per weight type, three runs each, the types alternated within each run (exact fixture,
# Qwen3-0.6B shape, one sequence, 2 threads, exact kernels), after patches 0001-0009.
set -eu
out=${1:-/tmp/curve3}
bin=${2:-build/bin/specdec}
mkdir -p $out
for run in 1 2 3; do
  for t in q4_k_m q6_k q5_k_m iq4_xs q4_0 q8_0; do
    $bin bench --fixture exact --fixture-type $t --n-draft 4 --curve-rows 16 -n 32 -r 3 -t 2 -q \
      --json $out/$t-$run.json > /dev/null
    echo "run $run: $t done"
  done
done
