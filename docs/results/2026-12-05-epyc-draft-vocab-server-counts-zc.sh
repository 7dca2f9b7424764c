#!/usr/bin/env bash
# Acceptance of the server's own counts against the tokenizer's ranking on the Zipf fixture.
set -euo pipefail
bin=/work/main/build/bin/specdec
model=/tmp/zipf.gguf
for n in 32768 64; do
  rm -f /tmp/zc-$n.txt
  $bin serve -m $model --port 8931 -np 1 -t 2 -c 1024 --n-draft 4 --draft-vocab $n --draft-vocab-counts /tmp/zc-$n.txt -v 2>/tmp/zc-$n.log &
  pid=$!
  for i in $(seq 100); do grep -q "listening on" /tmp/zc-$n.log && break; sleep 0.5; done
  for r in 1 2 3; do
    curl -s localhost:8931/v1/completions -d '{"prompt":[3,4,5,6],"max_tokens":256,"temperature":0}' \
      | python3 -c "import json,sys; d=json.load(sys.stdin)['specdec']; print('draft_vocab $n request $r: drafted', d['drafted'], 'accepted', d['accepted'], 'acceptance %.3f' % (d['accepted']/max(d['drafted'],1)), 'steps', d['steps'], 'tokens/step %.2f' % (256/d['steps']), 'first tokens', d['tokens'][:6])"
    sleep 0.3
  done
  grep "draft vocabulary counts" /tmp/zc-$n.log || true
  kill $pid; wait $pid || true
  echo "counts file: $(grep -c '^[0-9]' /tmp/zc-$n.txt) tokens listed"
done
