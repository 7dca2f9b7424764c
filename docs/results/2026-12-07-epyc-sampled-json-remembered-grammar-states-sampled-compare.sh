#!/bin/bash
# Sampled JSON-schema completions (temperature 0.8, seeded, 64 tokens, 8 requests) against
# two builds of specdec serve on the exact Qwen3-0.6B-shaped fixture, -np 4, 2 threads,
# alternated: OLD (before 6be8e83) and NEW; prints a Markdown table and checks the texts.
cd /work/main
echo "| build | --spec | clients | tokens | seconds | tok/s |"
echo "|---|---|---|---|---|---|"
for rep in 1 2; do for v in old new; do
  if [ $v = old ]; then B=/tmp/old-bin/specdec; L=/tmp/old-bin; else B=build/bin/specdec; L=build/bin:build/src; fi
  for spec in none mtp; do for c in 1 4; do
    /tmp/sampled-run.sh $B $L 4 $c 8 $spec > /tmp/sc-$v-$spec-$c-$rep.json
    python3 -c "import json; d=json.load(open('/tmp/sc-$v-$spec-$c-$rep.json')); print('| $v (round $rep) | $spec | $c |', d['tokens'], '|', d['seconds'], '|', d['tok_s'], '|')"
  done; done
done; done
python3 - <<'PY'
import json, glob
same = all(json.load(open(f.replace('-old-', '-new-')))['texts'] == json.load(open(f))['texts'] for f in glob.glob('/tmp/sc-old-*.json'))
print(f"\nEvery request's text identical in the two builds (same seed, same --spec, same clients): {'yes' if same else 'NO'}")
PY
