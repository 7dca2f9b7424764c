#!/usr/bin/env bash
# The specdec CLI end to end on generated fixtures: happy paths of every
# subcommand, and exit codes for bad input.
# Usage: test-cli.sh SPECDEC FIXTURE_TOOL CHECK_BENCH_JSON
set -u
# Worker threads sleep instead of spinning: ctest runs other test processes beside this one.
export OMP_WAIT_POLICY=PASSIVE
specdec="$1"
fixture="$2"
check_bench_json="$3"
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
check "fixture of a preset shape, overridden" "$fixture" glm4moe-mtp "$work/shape.gguf" --shape test-32k --n-layer 1 --type q4_k_m
check "preset shape recorded" exit_is 0 "$specdec" inspect "$work/shape.gguf"
check "preset vocabulary" contains "$work/out" "32768"
check "fixture shape for another kind" exit_is 2 "$fixture" qwen35-mtp "$work/bad.gguf" --shape qwen3-0.6b
head -c 3000 "$work/llama.gguf" > "$work/truncated.gguf"

# generate: speculative text equals plain text; --json carries the statistics.
exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" --spec none -p "abc" -n 40 && cp "$work/out" "$work/plain.txt"
check "plain generate" test -s "$work/plain.txt"
check "mtp generate" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40
check "mtp text equals plain" cmp -s "$work/out" "$work/plain.txt"
check "mtp summary" contains "$work/err" "accepted 3[0-9] (100.0%)"
check "adaptive generate" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --n-draft auto
check "adaptive equals plain" cmp -s "$work/out" "$work/plain.txt"
check "adaptive with a cap" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --n-draft auto --draft-max 2 --json
check "adaptive json" contains "$work/out" '"adaptive": true'
check "n-draft above draft-max" exit_is 1 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" --n-draft 4 --draft-max 2
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

# bench: every configuration identical to plain decoding, the JSON complete and
# consistent, the reports written
check "bench" exit_is 0 "$specdec" bench -m "$work/qwen35.gguf" -n 24 -r 2 --n-draft 1 --n-draft 3 --n-draft auto \
    --n-seq 1 --n-seq 2 -t 1 --json "$work/bench.json" --markdown "$work/bench.md" --chart "$work/bench.png"
check "bench table" contains "$work/out" "| mtp n=3 |"
check "bench table adaptive" contains "$work/out" "| mtp n=auto(3) x2 |"
check "bench json consistent" "$check_bench_json" "$work/bench.json" --exact
check "bench markdown" contains "$work/bench.md" "Every run was identical to plain decoding."
check "bench chart is a PNG" bash -c "head -c 4 '$work/bench.png' | grep -q PNG"
check "bench svg chart" exit_is 0 "$specdec" bench -m "$work/qwen35.gguf" -n 8 -r 1 --n-draft 2 -t 1 --chart "$work/bench.svg"
check "bench svg chart is SVG" contains "$work/bench.svg" "<svg"
check "bench chart format" exit_is 1 "$specdec" bench -m "$work/qwen35.gguf" -n 8 -r 1 --n-draft 2 -t 1 --chart "$work/bench.pdf"
check "bench draft length" exit_is 2 "$specdec" bench -m "$work/qwen35.gguf" --n-draft often
check "bench synthetic" exit_is 0 "$specdec" bench -m "$work/qwen35.gguf" -n 24 -r 1 --n-draft 4 -t 1 \
    --synthetic-acceptance 0.5 --json "$work/bench-synth.json"
check "bench synthetic json" "$check_bench_json" "$work/bench-synth.json" --synthetic
check "bench synthetic warns" contains "$work/err" "text is not valid"
check "bench with more sequences than one batch prefills" exit_is 0 "$specdec" bench -m "$work/qwen35.gguf" -n 4 -r 1 \
    --n-draft 2 --n-seq 64 -c 64 -t 1 --json "$work/bench-64.json"
check "bench 64 sequences json" "$check_bench_json" "$work/bench-64.json" --exact
check "bench on a generated fixture" exit_is 0 "$specdec" bench --fixture mixed --fixture-shape test-32k --fixture-blocks 1 \
    --fixture-type q8_0 -n 16 -r 1 --n-draft 2 --n-draft auto -t 1 --json "$work/bench-fixture.json" \
    --markdown "$work/bench-fixture.md"
check "bench fixture json" "$check_bench_json" "$work/bench-fixture.json"
check "bench fixture markdown" test -s "$work/bench-fixture.md"
check "bench fixture described" contains "$work/bench-fixture.json" '"drafter": "mixed"'
check "bench fixture shape described" contains "$work/bench-fixture.json" '"shape": "test-32k"'
check "bench fixture of an unknown shape" exit_is 2 "$specdec" bench --fixture exact --fixture-shape qwen9
check "bench needs a model or a fixture" exit_is 2 "$specdec" bench -n 4
check "bench model excludes fixture" exit_is 2 "$specdec" bench -m "$work/qwen35.gguf" --fixture exact
check "bench checker catches a broken document" bash -c \
    "sed 's/\"speedup\": 1.0/\"speedup\": 2.0/' '$work/bench.json' > '$work/broken.json'; ! '$check_bench_json' '$work/broken.json' 2>/dev/null"
upstream="$(dirname "$specdec")/specdec-upstream-reference"
# llama.cpp's example leaks at exit, which a leak-checking build would report as its failure.
check "bench against upstream" exit_is 0 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" "$specdec" bench \
    -m "$work/qwen35.gguf" -n 16 -r 1 --n-draft 2 -t 1 --upstream "$upstream" --json "$work/bench-up.json"
check "bench upstream ratio" contains "$work/bench-up.json" '"ours_over_upstream"'
printf '#!/bin/sh\necho broken; exit 3\n' > "$work/broken-reference" && chmod +x "$work/broken-reference"
check "bench with a failing reference" exit_is 1 "$specdec" bench -m "$work/qwen35.gguf" -n 8 -r 1 --n-draft 2 -t 1 \
    --upstream "$work/broken-reference"
check "bench reports the reference's failure" contains "$work/err" "failed (wait status 768); its output ends with: broken"
check "bench upstream json consistent" "$check_bench_json" "$work/bench-up.json" --exact

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
