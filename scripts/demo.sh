#!/usr/bin/env bash
# Sets everything up (scripts/bootstrap.sh), builds specdec, then shows it in
# three parts:
#  1. Every strategy on tiny generated models (a 128-token vocabulary, width
#     256). They are constructed so that the target continues "abc" with the
#     next vocabulary pieces and the drafters are exactly right, or right
#     except for every 4th token ("wrong"), so acceptance is known in
#     advance. On models this small a drafting pass costs as much as a
#     target step, so their speeds are not the point.
#  2. One realistic comparison: plain decoding against MTP on a generated
#     target of Qwen3-0.6B's shape at Q4_K_M, whose MTP head is always
#     right (`specdec bench`: warm-up, interleaved rounds, medians, every
#     run's tokens compared with plain decoding's). It prints the measured
#     speedup and whether the text was identical.
#  3. That model behind `specdec serve`, asked for a chat completion with
#     curl; then the two commands to do it yourself.
# The realistic model (505 MiB, about a minute to write on 2 cores) is kept
# in SPECDEC_CACHE_DIR/demo for the next run, named after the fixture
# generator's sources so that a changed generator writes it again.
# Environment: SPECDEC_BUILD_DIR (default build), SPECDEC_JOBS (default
# nproc), SPECDEC_CACHE_DIR (default ~/.cache/specdec).
set -euo pipefail
cd "$(dirname "$0")/.."

llama_dir="$(scripts/bootstrap.sh | tail -n 1)"
build_dir="${SPECDEC_BUILD_DIR:-build}"
scripts/build.sh "$build_dir" -DCMAKE_BUILD_TYPE=Release -DSPECDEC_LLAMA_DIR="$llama_dir" -- specdec-cli specdec-fixture
"$build_dir/bin/specdec" info | head -n 3

specdec="$(cd "$build_dir/bin" && pwd)/specdec"
fixture="$build_dir/bin/specdec-fixture"
models="$build_dir/demo"
mkdir -p "$models"
"$fixture" qwen35-mtp  "$models/qwen35-mtp.gguf" --quiet
"$fixture" glm4moe-mtp "$models/glm4moe-mtp-wrong.gguf" --drafter wrong --quiet
"$fixture" llama       "$models/llama.gguf" --quiet
"$fixture" eagle3      "$models/eagle3.gguf" --quiet
"$fixture" dflash      "$models/dflash-wrong.gguf" --drafter wrong --quiet
"$fixture" dflash2     "$models/dflash2.gguf" --quiet
"$fixture" llama-draft "$models/llama-draft-wrong.gguf" --drafter wrong --quiet

run() { # run TITLE ARGS...
    local title="$1"; shift
    echo
    echo "== $title"
    "$specdec" generate "$@" -p "abc" -n 48 --n-draft 4
}

echo
echo "#### Part 1: every strategy on tiny models (128 tokens, width 256)"
echo "On models this small a drafting pass costs about as much as a target step, so"
echo "speculation does not pay here: their tokens/s are not the point. Look at how"
echo "many drafted tokens were accepted, and at the text: the same in every run."
echo
echo "== plain decoding (the reference every strategy must reproduce)"
"$specdec" generate -m "$models/llama.gguf" --spec none -p "abc" -n 48
run "MTP, hybrid recurrent target (qwen35), exact head"      -m "$models/qwen35-mtp.gguf"
run "MTP, attention MoE target (glm4moe), wrong every 4th"   -m "$models/glm4moe-mtp-wrong.gguf"
run "EAGLE-3 draft"                                          -m "$models/llama.gguf" -md "$models/eagle3.gguf"
run "DFlash draft, wrong every 4th"                          -m "$models/llama.gguf" -md "$models/dflash-wrong.gguf"
run "DFlash2 draft (detected from its metadata)"             -m "$models/llama.gguf" -md "$models/dflash2.gguf"
run "classic draft model, wrong every 4th"                   -m "$models/llama.gguf" -md "$models/llama-draft-wrong.gguf" --spec draft
run "n-gram lookup (little to find in a short prompt)"       -m "$models/llama.gguf" --spec ngram-simple
echo
echo "== a target/draft pair that does not fit"
"$fixture" eagle3 "$models/eagle3-for-6-layers.gguf" --n-layer 6 --quiet
"$specdec" inspect "$models/llama.gguf" "$models/eagle3-for-6-layers.gguf" || true

echo
echo "#### Part 2: plain decoding against MTP at a real model's size"
cache_dir="${SPECDEC_CACHE_DIR:-$HOME/.cache/specdec}/demo"
generator="$(cat fixtures/*.h fixtures/*.cpp | sha256sum | cut -c1-12)"
model="$cache_dir/qwen3-0.6b-q4_k_m-exact-$generator.gguf"
echo "A generated target of Qwen3-0.6B's shape (28 blocks, width 1024, 151,936 tokens,"
echo "Q4_K_M; weights constructed so that its text is known in advance) with one MTP"
echo "block that always drafts the right token: real MTP heads are right less often."
if [ -s "$model" ]; then
    echo "(written by an earlier run: $model)"
else
    mkdir -p "$cache_dir"
    rm -f "$cache_dir"/qwen3-0.6b-q4_k_m-exact-*.gguf # an older generator's
    "$fixture" glm4moe-mtp "$model.tmp" --shape qwen3-0.6b --drafter exact --type q4_k_m
    mv "$model.tmp" "$model"
fi
# How busy the CPUs are with other work, over two seconds in which this
# script does nothing: decoding speeds measured beside it are not reliable.
cpu_busy() {
    local a b
    a="$(head -n 1 /proc/stat)"; sleep 2; b="$(head -n 1 /proc/stat)"
    echo "$a" "$b" | awk '{ n = (NF - 2) / 2; for (i = 2; i <= n + 1; i++) { t1 += $i; t2 += $(i + n + 1) }
                           idle = ($(n + 1 + 5) + $(n + 1 + 6)) - ($5 + $6); printf "%d", 100 * (1 - idle / (t2 - t1)) }'
}
busy="$(cpu_busy)"
if [ "$busy" -gt 20 ]; then
    echo "warning: other processes kept the CPUs ${busy}% busy just now: the speeds below will be noisy"
fi
result="$models/qwen3-0.6b-bench.json"
"$specdec" bench -m "$model" --spec mtp --n-draft 8 -n 64 -r 3 --speedups-only --json "$result" >"$models/qwen3-0.6b-bench.md"
cpu="$(grep -m 1 '^model name' /proc/cpuinfo | sed 's/^[^:]*: *//' || true)"
python3 - "$result" "${cpu:-this CPU}" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
plain = next(r for r in j["results"] if r["strategy"] == "none")
mtp = next(r for r in j["results"] if r["strategy"] == "mtp")
rounds = mtp["speedup_by_round"]
s = mtp["speedup"]
print(f"plain decoding:          {plain['tokens_per_second']:6.1f} tokens/s")
print(f"MTP, 8 tokens a step:    {mtp['tokens_per_second']:6.1f} tokens/s "
      f"({mtp['tokens_per_step']:.1f} tokens a step, {100 * mtp['acceptance']:.0f}% of drafts accepted)")
print(f"measured on {sys.argv[2]}, {j['threads']} threads, {j['n_predict']} tokens, median of {j['repeats']} rounds "
      f"(rounds {min(rounds):.2f}x-{max(rounds):.2f}x)")
same = "identical text" if mtp["identical_to_plain"] else "the text DIFFERS from plain decoding"
faster = f"{s:.2f}x faster" if s >= 1 else f"{s:.2f}x the speed (slower)"
print(f"=> {faster}, {same} (every MTP run's {j['n_predict']} tokens against plain decoding's).")
cost = mtp["tokens_per_step"] / mtp["limit"] if mtp["limit"] > 0 else 0
print(f"Each MTP step drafted 8 tokens and verified 9 in the time of about {cost:.1f} plain steps,")
print(f"and yielded {mtp['tokens_per_step']:.1f}. What you gain depends on the model's size (how much one")
print("step costs against verifying several tokens at once) and on how often its drafter")
print("is right. More in docs/bench.md.")
if max(rounds) > 1.25 * min(rounds):
    print(f"The rounds disagree ({min(rounds):.2f}x to {max(rounds):.2f}x): the CPUs' speed changed between rounds")
    print("(other work here, or on the host under a virtual machine), so this ratio is not reliable.")
    print("Run scripts/demo.sh again on an idle machine (the model is kept).")
EOF

echo
echo "#### Part 3: the same model behind the OpenAI-compatible server"
chat_request='{"messages":[{"role":"user","content":"Hello! What can you do?"}],"max_tokens":32}'
server_log="$models/serve.log"
"$specdec" serve -m "$model" --port 0 -np 1 2>"$server_log" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
url=""
for _ in $(seq 1 600); do
    url="$(sed -n 's/^specdec serve: listening on \(http:[^ ]*\).*/\1/p' "$server_log")"
    [ -n "$url" ] && break
    kill -0 "$server" 2>/dev/null || { echo "the server stopped:" >&2; cat "$server_log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$url" ] || { echo "the server did not start in 60 s:" >&2; cat "$server_log" >&2; exit 1; }
echo "POST $url/v1/chat/completions $chat_request"
curl -sS --fail-with-body "$url/v1/chat/completions" -H 'Content-Type: application/json' -d "$chat_request" \
    | python3 -c 'import json, sys; r = json.load(sys.stdin); print("reply (the next pieces of its vocabulary, not words):", json.dumps(r["choices"][0]["message"]["content"])); print("usage:", r["usage"])'
kill "$server"
wait "$server" 2>/dev/null || true
trap - EXIT

echo
echo "To chat with it yourself, start the server:"
echo "  $specdec serve -m $model"
echo "and, in another terminal:"
echo "  curl -s http://127.0.0.1:8080/v1/chat/completions -H 'Content-Type: application/json' -d '$chat_request'"
