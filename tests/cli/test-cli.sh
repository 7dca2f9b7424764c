#!/usr/bin/env bash
# The specdec CLI end to end on generated fixtures: happy paths of every
# subcommand, and exit codes for bad input. Usage: test-cli.sh SPECDEC FIXTURE_TOOL
set -u
# Worker threads sleep instead of spinning: ctest runs other test processes beside this one.
export OMP_WAIT_POLICY=PASSIVE
specdec="$1"
fixture="$2"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
passed=0
failed=0

check() { # check NAME CONDITION...
    local name="$1"; shift
    if "$@"; then passed=$((passed + 1)); else failed=$((failed + 1)); echo "FAILED: $name" >&2; fi
}
exit_is() { # exit_is CODE COMMAND...
    local want="$1"; shift
    "$@" >"$work/out" 2>"$work/err"
    local rc=$?
    [ "$rc" -eq "$want" ] || { echo "exit $rc, want $want: $*" >&2; cat "$work/err" >&2; return 1; }
}
contains() { grep -q -- "$2" "$1" || { echo "'$2' not in $1:" >&2; cat "$1" >&2; return 1; }; }

"$fixture" qwen35-mtp "$work/qwen35.gguf"
"$fixture" llama "$work/llama.gguf"
"$fixture" eagle3 "$work/eagle3.gguf"
"$fixture" eagle3 "$work/eagle3-deep.gguf" --n-layer 6
"$fixture" dflash2 "$work/dflash2.gguf"
"$fixture" qwen35-mtp "$work/qwen35-q8.gguf" --type q8_0
head -c 3000 "$work/llama.gguf" > "$work/truncated.gguf"

# generate: speculative text equals plain text; --json carries the statistics.
exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" --spec none -p "abc" -n 40 && cp "$work/out" "$work/plain.txt"
check "plain generate" test -s "$work/plain.txt"
check "mtp generate" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40
check "mtp text equals plain" cmp -s "$work/out" "$work/plain.txt"
check "mtp summary" contains "$work/err" "accepted 3[0-9] (100.0%)"
check "mtp json" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --json --n-draft 4
check "json acceptance" contains "$work/out" '"acceptance_rate": 1.0'
check "json strategy" contains "$work/out" '"strategy": "mtp"'
check "json timings" contains "$work/out" '"bookkeeping"'

exit_is 0 "$specdec" generate -m "$work/llama.gguf" --spec none -p "hello" -p "xyz" -n 20 && cp "$work/out" "$work/plain2.txt"
check "eagle3 two sequences" exit_is 0 "$specdec" generate -m "$work/llama.gguf" -md "$work/eagle3.gguf" -p "hello" -p "xyz" -n 20
check "eagle3 text equals plain" cmp -s "$work/out" "$work/plain2.txt"
check "auto picks eagle3" contains "$work/err" "eagle3,"
check "dflash2 by auto" exit_is 0 "$specdec" generate -m "$work/llama.gguf" -md "$work/dflash2.gguf" -p "hello" -p "xyz" -n 20
check "dflash2 text equals plain" cmp -s "$work/out" "$work/plain2.txt"
check "ngram" exit_is 0 "$specdec" generate -m "$work/llama.gguf" --spec ngram-simple -p "hello" -p "xyz" -n 20
check "ngram text equals plain" cmp -s "$work/out" "$work/plain2.txt"
check "sampling is seeded" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 30 --temp 4 --seed 7
cp "$work/out" "$work/sampled.txt"
check "sampled equals plain sampled" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" --spec none -p "abc" -n 30 --temp 4 --seed 7
check "same sampled text" cmp -s "$work/out" "$work/sampled.txt"
check "stop string" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --stop "gh" --json
check "stop reason" contains "$work/out" '"stop": "stop_string"'
check "stop text" contains "$work/out" '"text": "def"'

check "quantized plain" exit_is 0 "$specdec" generate -m "$work/qwen35-q8.gguf" --spec none -p "abc" -n 30
cp "$work/out" "$work/q8-plain.txt"
check "quantized mtp" exit_is 0 "$specdec" generate -m "$work/qwen35-q8.gguf" -p "abc" -n 30
check "quantized text equals plain" cmp -s "$work/out" "$work/q8-plain.txt"
check "quantized exact head" contains "$work/err" "(100.0%)"

# inspect
check "inspect one" exit_is 0 "$specdec" inspect "$work/qwen35.gguf"
check "inspect lists mtp" contains "$work/out" "strategies     mtp"
check "inspect pair" exit_is 0 "$specdec" inspect "$work/llama.gguf" "$work/dflash2.gguf"
check "inspect dflash2" contains "$work/out" "(dflash2)"
check "incompatible pair" exit_is 1 "$specdec" inspect "$work/llama.gguf" "$work/eagle3-deep.gguf"
check "incompatible reason" contains "$work/out" "LAYER_MISMATCH"
check "inspect json" exit_is 0 "$specdec" inspect "$work/llama.gguf" "$work/eagle3.gguf" --json
check "inspect json pair" contains "$work/out" '"compatible": true'

# bench: every configuration identical to plain decoding, and the JSON complete
check "bench" exit_is 0 "$specdec" bench -m "$work/qwen35.gguf" -n 24 -r 2 --n-draft 1 --n-draft 3 -t 1 --json "$work/bench.json"
check "bench table" contains "$work/out" "| mtp n=3 |"
for field in tokens_per_second speedup limit achieved_of_limit acceptance tokens_per_step verify_share draft_share bookkeeping_share acceptance_by_position; do
    check "bench json $field" contains "$work/bench.json" "\"$field\""
done
check "bench identical" bash -c "! grep -q '\"identical_to_plain\": false' '$work/bench.json'"
check "bench exact acceptance" contains "$work/bench.json" '"acceptance": 1.0'
check "bench numbers finite" bash -c "! grep -qiE 'nan|inf' '$work/bench.json'"
check "bench plain speedup is 1" contains "$work/bench.json" '"speedup": 1.0'
upstream="$(dirname "$specdec")/specdec-upstream-reference"
# llama.cpp's example leaks at exit, which a leak-checking build would report as its failure.
check "bench against upstream" exit_is 0 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" "$specdec" bench \
    -m "$work/qwen35.gguf" -n 16 -r 1 --n-draft 2 -t 1 --upstream "$upstream" --json "$work/bench-up.json"
check "bench upstream ratio" contains "$work/bench-up.json" '"ours_over_upstream"'

# bad input
check "missing model file" exit_is 2 "$specdec" generate -m "$work/none.gguf" -p x
check "missing inspected file" exit_is 1 "$specdec" inspect "$work/none.gguf"
check "missing file named" contains "$work/err" "IO_ERROR"
check "truncated file" exit_is 1 "$specdec" inspect "$work/truncated.gguf"
check "truncated named" contains "$work/err" "MALFORMED_FILE"
check "wrong strategy for the model" exit_is 1 "$specdec" generate -m "$work/llama.gguf" --spec mtp -p x
check "wrong strategy named" contains "$work/err" "MODEL_UNSUPPORTED"
check "incompatible pair refused" exit_is 1 "$specdec" generate -m "$work/llama.gguf" -md "$work/eagle3-deep.gguf" -p x
check "unknown strategy" exit_is 1 "$specdec" generate -m "$work/llama.gguf" --spec medusa -p x
check "no prompt" exit_is 1 "$specdec" generate -m "$work/llama.gguf"
check "unknown option" exit_is 2 "$specdec" generate -m "$work/llama.gguf" --frobnicate
check "no subcommand" exit_is 2 "$specdec"
check "draft length out of range" exit_is 2 "$specdec" generate -m "$work/llama.gguf" -p x --n-draft 0

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
