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
refuses_ranking() { # refuses_ranking NAME TEXT MESSAGE: a --draft-vocab-file holding TEXT stops generate at start, saying MESSAGE
    printf '%s' "$2" > "$work/ranking-bad.txt"
    check "draft vocab file: $1" exit_is 1 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 4 --draft-vocab-file "$work/ranking-bad.txt"
    check "draft vocab file: $1, said" contains "$work/err" "INVALID_ARGUMENT: --draft-vocab-file $work/ranking-bad.txt$3"
}
is_text() { # is_text FILE TEXT: the file holds exactly TEXT and a newline
    printf '%s\n' "$2" | cmp -s - "$1" || { echo "$1 is not '$2':" >&2; cat "$1" >&2; return 1; }
}

"$fixture" qwen35-mtp "$work/qwen35.gguf"
"$fixture" llama "$work/llama.gguf"
"$fixture" eagle3 "$work/eagle3.gguf"
"$fixture" eagle3 "$work/eagle3-deep.gguf" --n-layer 6
"$fixture" dflash2 "$work/dflash2.gguf"
"$fixture" qwen35-mtp "$work/qwen35-q8.gguf" --type q8_0
check "fixture of a preset shape, overridden" exit_is 0 "$fixture" glm4moe-mtp "$work/shape.gguf" --shape test-32k --n-layer 1 --type q4_k_m
check "fixture progress: each stage" contains "$work/err" "specdec-fixture: writing the F16 weights"
check "fixture progress: tensors quantized" contains "$work/err" "specdec-fixture: quantizing to Q4_K_M: 41/41 tensors"
check "fixture --quiet" exit_is 0 "$fixture" glm4moe-mtp "$work/shape-quiet.gguf" --shape test-32k --n-layer 1 --type q4_k_m --quiet
check "fixture --quiet prints nothing" test ! -s "$work/err"
check "fixture --quiet writes the same file" cmp -s "$work/shape.gguf" "$work/shape-quiet.gguf"
check "preset shape recorded" exit_is 0 "$specdec" inspect "$work/shape.gguf"
check "preset vocabulary" contains "$work/out" "32768"
check "fixture shape for another kind" exit_is 2 "$fixture" qwen35-mtp "$work/bad.gguf" --shape qwen3-0.6b
check "fixture of an unknown type" exit_is 105 "$fixture" llama "$work/bad.gguf" --type q3_k_x
check "unknown type: the valid ones listed" contains "$work/err" "expected one of .*iq4_xs.*bf16"
check "fixture needing an importance matrix" exit_is 0 "$fixture" glm4moe-mtp "$work/iq2.gguf" --shape test-32k --n-layer 1 --type iq2_xxs --quiet
check "inspect: exact kernels cover IQ2_XXS" exit_is 0 "$specdec" inspect "$work/iq2.gguf"
check "inspect says so" contains "$work/out" "exact kernels  yes"
# A weight type exact kernels do not cover: named, and refused under them.
"$fixture" llama "$work/q1.gguf" --type q1_0 --quiet
check "inspect: exact kernels do not cover Q1_0" exit_is 0 "$specdec" inspect "$work/q1.gguf"
check "inspect names the type" contains "$work/out" "exact kernels  no: not exact: its q1_0 weights"
check "generate refuses it under exact kernels" exit_is 1 "$specdec" generate -m "$work/q1.gguf" --spec none -p abc -n 4
check "the refusal names the type" contains "$work/err" "q1_0 weights are not covered"
check "generate runs it with --kernels fast" exit_is 0 "$specdec" generate -m "$work/q1.gguf" --spec none -p abc -n 4 --kernels fast
head -c 3000 "$work/llama.gguf" > "$work/truncated.gguf"
# The qwen35 fixture with a byte of its name (general.name) that is not UTF-8.
cp "$work/qwen35.gguf" "$work/latin1-name.gguf"
name_at="$(grep -obUa "specdec-fixture-qwen35" "$work/latin1-name.gguf" | head -1 | cut -d: -f1)"
printf '\xff' | dd of="$work/latin1-name.gguf" bs=1 seek=$((name_at + 16)) conv=notrunc 2>/dev/null

# generate: speculative text equals plain text; --json carries the statistics.
exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" --spec none -p "abc" -n 40 && cp "$work/out" "$work/plain.txt"
# The controlled target continues with the next token: after "abc" the
# printable ASCII characters, then the two-letter pieces.
check "plain generate" is_text "$work/plain.txt" "defghijklmnopqrstuvwxyz{|}~aaabacadaeafagahaiajakalam"
check "mtp generate" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40
check "mtp text equals plain" cmp -s "$work/out" "$work/plain.txt"
check "mtp summary" contains "$work/err" "40 tokens in 11 steps, drafted 29, accepted 29 (100.0%)" # the prompt's token, 9 steps of 4, then 3
# A restricted draft vocabulary keeps the text; the ranking file is checked before loading.
check "draft vocab" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --draft-vocab 40
check "draft vocab keeps the text" cmp -s "$work/out" "$work/plain.txt"
printf '# most frequent first\n70 71 72\n73\n' > "$work/ranking.txt"
check "draft vocab file" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --draft-vocab-file "$work/ranking.txt"
check "draft vocab file keeps the text" cmp -s "$work/out" "$work/plain.txt"
refuses_ranking "an id twice" $'70 71\n70\n' ":2: token 70 was given before, on line 1"
refuses_ranking "an id out of range" $'70 128\n' ":1: token 128 is outside"
refuses_ranking "empty" $'# none\n' " holds no token ids"
refuses_ranking "not an id" $'70 seventy\n' ":1: 'seventy' is not a token id"
# Token counts (rank-vocab's and serve --draft-vocab-counts' form), checked alike.
refuses_ranking "counts: a token twice" $'# a hand-written count\n\nvocabulary 128\n99 2\n5 1\n5 1\n' ":6: token 5 was counted before"
refuses_ranking "counts: another vocabulary" $'vocabulary 151936\n99 2\n' ":1: counted over a vocabulary of 151936 tokens, but the model's has 128"
refuses_ranking "counts: none" $'vocabulary 128\n' " counts no token"
check "draft vocab above the vocabulary" exit_is 1 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 4 --draft-vocab 129
check "draft vocab above the file" exit_is 1 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 4 --draft-vocab 5 --draft-vocab-file "$work/ranking.txt"
check "draft vocab: not a number" exit_is 2 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 4 --draft-vocab many
# rank-vocab: the ids of a text, most frequent first, with their counts. The fixture's
# vocabulary: U+2581 is 3, '!' 4, 'c' 70, "ab" 99; the text is "_ab ab _ab _ab c !".
printf 'abab ab abc!' > "$work/text.txt"
check "rank-vocab" exit_is 0 "$specdec" rank-vocab -m "$work/qwen35.gguf" "$work/text.txt"
check "rank-vocab: ids and counts" cmp -s <(grep -v '^#' "$work/out") <(printf 'vocabulary 128\n99 4\n3 3\n4 1\n70 1\n')
check "rank-vocab --top, -o" exit_is 0 "$specdec" rank-vocab -q -m "$work/qwen35.gguf" "$work/text.txt" --top 2 -o "$work/top2.txt"
check "rank-vocab -q -o: nothing on stdout or stderr" test ! -s "$work/out" -a ! -s "$work/err"
check "rank-vocab --top: the first two" cmp -s <(grep -v '^#' "$work/top2.txt") <(printf 'vocabulary 128\n99 4\n3 3\n')
# Counted from the model's own output, the subset holds every draft: the same steps as the whole vocabulary.
tr -d '\n' < "$work/plain.txt" > "$work/plain-line.txt" # the fixture's vocabulary has no newline
check "rank-vocab of the output" exit_is 0 "$specdec" rank-vocab -m "$work/qwen35.gguf" "$work/plain-line.txt" -o "$work/output-ranking.txt"
check "draft vocab counted from the output" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --draft-vocab-file "$work/output-ranking.txt"
check "... keeps the text" cmp -s "$work/out" "$work/plain.txt"
check "... and every draft" contains "$work/err" "40 tokens in 11 steps, drafted 29, accepted 29 (100.0%)"
: > "$work/empty.txt"
check "rank-vocab: no tokens" exit_is 1 "$specdec" rank-vocab -m "$work/qwen35.gguf" "$work/empty.txt"
check "rank-vocab: no tokens, said" contains "$work/err" "INVALID_ARGUMENT: the text files hold no tokens"
printf 'line\nbreak' > "$work/newline.txt"
check "rank-vocab: text the vocabulary lacks" exit_is 1 "$specdec" rank-vocab -m "$work/qwen35.gguf" "$work/newline.txt"
check "rank-vocab: the file and byte named" contains "$work/err" "UNREPRESENTABLE_TEXT: $work/newline.txt, bytes 0-10: .*0x0A at byte 4"
check "rank-vocab: output not writable" exit_is 1 "$specdec" rank-vocab -m "$work/qwen35.gguf" "$work/text.txt" -o "$work/no/such/dir/r.txt"
check "rank-vocab: output not writable, said" contains "$work/err" "IO_ERROR: --output $work/no/such/dir/r.txt: cannot be written (no folder"
cp "$work/top2.txt" "$work/kept.txt"
check "rank-vocab: a failed run" exit_is 1 "$specdec" rank-vocab -m "$work/qwen35.gguf" "$work/newline.txt" -o "$work/kept.txt"
check "... leaves the output file as it was" cmp -s "$work/top2.txt" "$work/kept.txt"
check "rank-vocab: a text that is not there" exit_is 2 "$specdec" rank-vocab -m "$work/qwen35.gguf" "$work/none.txt"
check "rank-vocab: not a model" exit_is 1 "$specdec" rank-vocab -m "$work/text.txt" "$work/text.txt"
# llama.cpp's model and context options reach it and keep the text.
check "llama options" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 -ctk q8_0 -ctv q8_0 -fa on -b 64 -ub 32 \
    -tb 1 --no-mmap --override-kv general.name=str:renamed --rope-freq-base 10000
check "llama options keep the text" cmp -s "$work/out" "$work/plain.txt"
check "a quantized V cache without flash attention is refused" exit_is 1 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 4 -ctv q4_0 -fa off
check "a malformed --override-kv" exit_is 1 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 4 --override-kv general.name=text:x
check "a malformed --override-kv names itself" contains "$work/err" "--override-kv general.name=text:x"
check "an unknown cache type" exit_is 2 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 4 -ctk q3_k
check "adaptive generate" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --n-draft auto
check "adaptive equals plain" cmp -s "$work/out" "$work/plain.txt"
check "adaptive with a cap" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --n-draft auto --draft-max 2 --json
check "adaptive json" contains "$work/out" '"adaptive": true'
check "exact kernels by default" contains "$work/out" '"exact_kernels": true'
check "fast kernels" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --kernels fast --json
check "fast kernels in json" contains "$work/out" '"exact_kernels": false'
check "fast kernels say so" contains "$work/err" "output may differ"
check "untokenizable prompt" exit_is 1 "$specdec" generate -m "$work/qwen35.gguf" -p $'ab\ncd' -n 4 # no newline in the test vocabulary
check "untokenizable prompt says why" contains "$work/err" "vocabulary cannot represent this text: the character 0x0A at byte 2 has no token"
check "unknown kernels" exit_is 2 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" --kernels turbo
check "n-draft above draft-max" exit_is 1 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" --n-draft 4 --draft-max 2
check "draft-max below the default n-draft" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --draft-max 2 --json
check "draft-max lowers the default" contains "$work/out" '"steps": 14,' # the prompt's token, then 3 tokens a step
check "draft-min above the draft length" exit_is 1 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 4 --draft-max 8 --draft-min 4
check "draft-min above the draft length: says so" contains "$work/err" "--draft-min 4 exceeds the draft length (--n-draft 3)"
check "byte tokens fixture" exit_is 0 "$fixture" glm4moe-mtp "$work/bytes.gguf" --n-vocab 384 --byte-tokens --set tokenizer.ggml.add_bos_token=bool:true --quiet
check "byte tokens: a newline tokenizes" exit_is 0 "$specdec" generate -m "$work/bytes.gguf" -p $'ab\ncd' -n 4
check "byte tokens need room" exit_is 1 "$fixture" glm4moe-mtp "$work/bytes-small.gguf" --byte-tokens --quiet
check "byte tokens need room: says so" contains "$work/err" "needs --n-vocab >= 384"
check "a bad bool" exit_is 2 "$fixture" glm4moe-mtp "$work/bad-bool.gguf" --set tokenizer.ggml.add_bos_token=bool:yes --quiet
check "mtp json" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --json --n-draft 4
check "json acceptance" contains "$work/out" '"acceptance_rate": 1.0'
check "json strategy" contains "$work/out" '"strategy": "mtp"'
check "json generated" contains "$work/out" '"generated": 40,'
check "json steps" contains "$work/out" '"steps": 9,' # the prompt's token, then 5 tokens a step
check "json timings" grep -Eq '"bookkeeping": -?[0-9]' "$work/out"

exit_is 0 "$specdec" generate -m "$work/llama.gguf" --spec none -p "hello" -p "xyz" -n 20 && cp "$work/out" "$work/plain2.txt"
check "plain two sequences" is_text "$work/plain2.txt" "$(printf 'pqrstuvwxyz{|}~aaabacadae\n\n{|}~aaabacadaeafagahaiajakalamanaoap')"
check "eagle3 two sequences" exit_is 0 "$specdec" generate -m "$work/llama.gguf" -md "$work/eagle3.gguf" -p "hello" -p "xyz" -n 20
check "eagle3 text equals plain" cmp -s "$work/out" "$work/plain2.txt"
check "auto picks eagle3" contains "$work/err" "eagle3,"
check "dflash2 by auto" exit_is 0 "$specdec" generate -m "$work/llama.gguf" -md "$work/dflash2.gguf" -p "hello" -p "xyz" -n 20
check "dflash2 text equals plain" cmp -s "$work/out" "$work/plain2.txt"
check "ngram" exit_is 0 "$specdec" generate -m "$work/llama.gguf" --spec ngram-simple -p "hello" -p "xyz" -n 20
check "ngram text equals plain" cmp -s "$work/out" "$work/plain2.txt"
check "sampling is seeded" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 30 --temp 4 --seed 7 --accept exact
cp "$work/out" "$work/sampled.txt"
check "sampled equals plain sampled" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" --spec none -p "abc" -n 30 --temp 4 --seed 7
check "same sampled text" cmp -s "$work/out" "$work/sampled.txt"
check "rejection sampling" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 30 --temp 4 --seed 7 --n-draft 3 \
    --accept rejection --json
check "rejection sampling in json" contains "$work/out" '"accept": "rejection"'
cp "$work/out" "$work/rejection.json"
check "rejection sampling again" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 30 --temp 4 --seed 7 --n-draft 3 \
    --accept rejection --json
check "rejection sampling is seeded" bash -c "diff <(grep -A32 '\"tokens\"' '$work/out') <(grep -A32 '\"tokens\"' '$work/rejection.json')"
check "bad accept mode" exit_is 2 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" --accept often
check "stop string" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --stop "gh" --json
check "stop reason" contains "$work/out" '"stop": "stop_string"'
check "stop text" contains "$work/out" '"text": "def"'
check "stop tokens end with the one completing it" bash -c "tr -d ' \n' < '$work/out' | grep -q '\"tokens\":\[71,72,73,74,75\]'"
check "stop string streamed" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --stop "gh"
check "stop string never streamed" is_text "$work/out" "def"
check "earliest stop string wins" exit_is 0 "$specdec" generate -m "$work/qwen35.gguf" -p "abc" -n 40 --stop "gh" --stop "fgh"
check "earliest stop text" is_text "$work/out" "de"

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
check "inspect json with a name that is not UTF-8" exit_is 0 "$specdec" inspect "$work/latin1-name.gguf" --json
check "invalid byte replaced" contains "$work/out" "\"name\": \"specdec-fixture-$(printf '\xef\xbf\xbd')wen35-mtp\""

# bench: every configuration identical to plain decoding, the JSON complete and
# consistent, the reports written
check "bench" exit_is 0 "$specdec" bench -m "$work/qwen35.gguf" -n 24 -r 2 --n-draft 1 --n-draft 3 --n-draft auto \
    --n-seq 1 --n-seq 2 -t 1 --json "$work/bench.json" --markdown "$work/bench.md" --chart "$work/bench.png"
check "bench table" contains "$work/out" "| mtp n=3 |"
check "bench table adaptive" contains "$work/out" "| mtp n=auto(3) x2 |"
check "bench json consistent" "$check_bench_json" "$work/bench.json" --exact
check "bench markdown" contains "$work/bench.md" "Every run was identical to plain decoding."
check "bench chart is a PNG" bash -c "head -c 4 '$work/bench.png' | grep -q PNG"
check "bench progress: a line per run on a pipe" contains "$work/err" "bench: round 2/2: mtp n=3 x2 (run "
check "bench progress: the time left once a round was timed" contains "$work/err" "left in the rounds)"
check "bench progress: the verification cost" contains "$work/err" "bench: verification cost of 1 to 4 tokens, 2 sequences: pass 5/5"
check "bench exact against fast kernels" exit_is 0 "$specdec" bench -m "$work/qwen35.gguf" -n 16 -r 2 --n-draft 2 -t 1 \
    --kernels exact --kernels fast --json "$work/bench-kernels.json"
check "bench kernels json consistent" "$check_bench_json" "$work/bench-kernels.json" --exact
check "bench kernels: a fast row beside each" contains "$work/out" "| mtp n=2 fast |"
check "bench kernels: the comparison" contains "$work/out" "| exact / fast | tokens/s exact | fast | speed | rounds | prompt ms exact | fast | speed | rounds |"
check "bench kernels: the curve compared" contains "$work/out" "| verifying, 1 sequence: rows each | µs exact | fast | speed |"
check "bench kernels: each once" exit_is 2 "$specdec" bench -m "$work/qwen35.gguf" --kernels fast --kernels fast
check "bench temperatures" exit_is 0 "$specdec" bench -m "$work/qwen35.gguf" -n 16 -r 1 --n-draft 2 --temp 0 --temp 1 -t 1 \
    --speedups-only --json "$work/bench-temp.json"
check "bench temperatures json consistent" "$check_bench_json" "$work/bench-temp.json"
check "bench temperatures: both modes" contains "$work/out" "| mtp n=2 T=1 rejection |"
check "bench temperatures: exact sampled equals plain" bash -c \
    "grep -A30 '\"configuration\": \"mtp n=2 T=1 exact\"' '$work/bench-temp.json' | grep -q '\"identical_to_plain\": true'"
check "bench --quiet" exit_is 0 "$specdec" bench -m "$work/qwen35.gguf" -n 8 -r 2 --n-draft 2 -t 1 --quiet
check "bench --quiet prints no progress" bash -c "! grep -q 'bench:' '$work/err'"
check "bench --speedups-only" exit_is 0 "$specdec" bench -m "$work/qwen35.gguf" -n 8 -r 2 --n-draft 2 -t 1 --speedups-only \
    --json "$work/bench-speedups.json"
check "bench --speedups-only json consistent" "$check_bench_json" "$work/bench-speedups.json" --exact
check "bench --speedups-only measures no oracle" bash -c "! grep -q '\"oracle\"\|\"verify_cost\"' '$work/bench-speedups.json'"
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
check "bench checker catches a round's ratio too many" bash -c \
    "sed 's/\"speedup_by_round\": \\[/\"speedup_by_round\": [9.0, /' '$work/bench.json' > '$work/broken2.json'; ! cmp -s '$work/bench.json' '$work/broken2.json' && ! '$check_bench_json' '$work/broken2.json' 2>/dev/null"
upstream="$(dirname "$specdec")/specdec-upstream-reference"
# llama.cpp's example leaks at exit, which a leak-checking build would report as its failure.
check "bench against upstream" exit_is 0 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" "$specdec" bench \
    -m "$work/qwen35.gguf" -n 16 -r 1 --n-draft 2 -t 1 --upstream "$upstream" --json "$work/bench-up.json"
check "bench upstream ratio" grep -Eq '"ours_over_upstream": [0-9]' "$work/bench-up.json"
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

# Models llama.cpp loads and then aborts on in the first decode (issue 33):
# inspect refuses them, and so does every command, with exit 1 before decoding.
"$fixture" glm4moe-mtp "$work/rope-wide.gguf" --set glm4moe.rope.dimension_count=u32:128
"$fixture" glm4moe-mtp "$work/eps-negative.gguf" --set glm4moe.attention.layer_norm_rms_epsilon=f32:-1
"$fixture" glm4moe-mtp "$work/no-trunk.gguf" --set glm4moe.nextn_predict_layers=u32:3
check "fixture --set with a bad type" exit_is 2 "$fixture" llama "$work/bad.gguf" --set llama.block_count=i8:1
for bad in "rope-wide:glm4moe.rope.dimension_count is 128, above the head size 64" \
           "eps-negative:glm4moe.attention.layer_norm_rms_epsilon is -1" \
           "no-trunk:glm4moe.nextn_predict_layers is 3, equal to block_count"; do
    file="${bad%%:*}" why="${bad#*:}"
    check "inspect refuses $file" exit_is 1 "$specdec" inspect "$work/$file.gguf"
    check "inspect says why: $file" contains "$work/err" "MALFORMED_FILE: .*$why"
    check "generate refuses $file" exit_is 1 "$specdec" generate -m "$work/$file.gguf" -p abc -n 4
    check "generate says why: $file" contains "$work/err" "$why"
    check "bench refuses $file" exit_is 1 "$specdec" bench -m "$work/$file.gguf" -n 4 -r 1 --n-draft 1 -t 1
    check "bench says why: $file" contains "$work/err" "$why"
done
# A file llama.cpp's loader refuses (llama requires the rope to span the
# head) while inspect passes it: the error carries llama.cpp's own reason.
"$fixture" llama "$work/llama-rope-short.gguf" --set llama.rope.dimension_count=u32:2
check "loader refusal" exit_is 1 "$specdec" generate -m "$work/llama-rope-short.gguf" --spec none -p abc -n 4
check "loader refusal carries llama.cpp's reason" contains "$work/err" "cannot load model .*: llama.cpp: .*invalid n_rot: 2"

# The build: versions, the CPU kernels in use, llama.cpp's log on -v.
check "version" exit_is 0 "$specdec" --version
check "version names llama.cpp" grep -Eq "^specdec [0-9]+\.[0-9]+\.[0-9]+ \(llama.cpp v0\.5\.0, commit [0-9a-f]{40}\)$" "$work/out"
check "info" exit_is 0 "$specdec" info --json
check "info: kernels compiled and runnable here" python3 -c '
import json, sys
j = json.load(open(sys.argv[1]))
cpu = j["cpu"]
assert cpu["missing_on_host"] == [], cpu
assert "AMX_INT8" not in cpu["compiled_features"], cpu     # never chosen by auto
assert cpu["kernels"].split(":")[0] in ("avx512", "avx2", "sse42", "x64", "default", "native"), cpu
assert any(d["type"] == "CPU" for d in j["devices"]), j["devices"]
' "$work/out"
check "-v after the subcommand" exit_is 0 "$specdec" generate -v -m "$work/llama.gguf" --spec none -p abc -n 4
check "-v shows llama.cpp's warnings only" bash -c '! grep -q "llama_model_loader: loaded meta data" "$0"' "$work/err"
check "-vv shows llama.cpp's log" exit_is 0 "$specdec" generate -vv -m "$work/llama.gguf" --spec none -p abc -n 4
check "-vv log on stderr" contains "$work/err" "llama_model_loader"
check "-v before the subcommand" exit_is 0 "$specdec" -v inspect "$work/llama.gguf"

echo "cli: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
