#!/usr/bin/env bash
# Sets everything up (scripts/bootstrap.sh), builds specdec, generates small
# test models and runs a short speculative generation with each strategy.
# The models are constructed so that the target continues "abc" with the
# next vocabulary pieces and the drafters are exactly right, or right except
# for every 4th token ("wrong"), so acceptance is known in advance.
# Environment: SPECDEC_BUILD_DIR (default build), SPECDEC_JOBS (default nproc).
set -euo pipefail
cd "$(dirname "$0")/.."

llama_dir="$(scripts/bootstrap.sh | tail -n 1)"
build_dir="${SPECDEC_BUILD_DIR:-build}"
scripts/build.sh "$build_dir" -DCMAKE_BUILD_TYPE=Release -DSPECDEC_LLAMA_DIR="$llama_dir" -- specdec-cli specdec-fixture
"$build_dir/bin/specdec" info | head -n 3

specdec="$build_dir/bin/specdec"
fixture="$build_dir/bin/specdec-fixture"
models="$build_dir/demo"
mkdir -p "$models"
"$fixture" qwen35-mtp  "$models/qwen35-mtp.gguf"
"$fixture" glm4moe-mtp "$models/glm4moe-mtp-wrong.gguf" --drafter wrong
"$fixture" llama       "$models/llama.gguf"
"$fixture" eagle3      "$models/eagle3.gguf"
"$fixture" dflash      "$models/dflash-wrong.gguf" --drafter wrong
"$fixture" dflash2     "$models/dflash2.gguf"
"$fixture" llama-draft "$models/llama-draft-wrong.gguf" --drafter wrong

run() { # run TITLE ARGS...
    local title="$1"; shift
    echo
    echo "== $title"
    "$specdec" generate "$@" -p "abc" -n 48 --n-draft 4
}

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
"$fixture" eagle3 "$models/eagle3-for-6-layers.gguf" --n-layer 6
"$specdec" inspect "$models/llama.gguf" "$models/eagle3-for-6-layers.gguf" || true
