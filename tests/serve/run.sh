#!/usr/bin/env bash
# `specdec serve` end to end over real HTTP with the official `openai` npm
# client: node's own test runner (node:test) runs tests/serve/*.test.mjs,
# each of which starts and stops its servers (helpers in server.mjs).
# Usage: run.sh SPECDEC FIXTURE_TOOL [TEST_NAME...]   (names: api errors shutdown demo soak hostile near-ties tools reasoning connections native anthropic responses; default api errors shutdown demo)
# The anthropic test uses the official `@anthropic-ai/sdk` client, installed the same way.
# Environment: SPECDEC_SOAK_REQUESTS (soak size, default 240), SPECDEC_CACHE_DIR (default ~/.cache/specdec).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
specdec="$1"
fixture="$2"
shift 2
tests=("$@")
[ ${#tests[@]} -eq 0 ] && tests=(api errors shutdown demo)

# The official client at a pinned version, installed once outside the repository.
readonly OPENAI_VERSION="6.49.0"
cache_dir="${SPECDEC_CACHE_DIR:-$HOME/.cache/specdec}"
openai_dir="$cache_dir/node-openai-$OPENAI_VERSION"
command -v node >/dev/null 2>&1 || { echo "serve tests: node is missing (scripts/bootstrap.sh installs nodejs and npm)" >&2; exit 1; }
if [ ! -f "$openai_dir/node_modules/openai/package.json" ]; then
    command -v npm >/dev/null 2>&1 || { echo "serve tests: npm is missing (scripts/bootstrap.sh installs it)" >&2; exit 1; }
    mkdir -p "$cache_dir"
    # Several test processes may install at once: each into its own directory, then one rename wins.
    tmp="$(mktemp -d "$cache_dir/node-openai-tmp.XXXXXX")"
    timeout 300 npm install --prefix "$tmp" --no-audit --no-fund --no-package-lock --silent "openai@$OPENAI_VERSION" >&2 \
        || { rm -rf "$tmp"; echo "serve tests: npm could not install openai@$OPENAI_VERSION" >&2; exit 1; }
    mv -T "$tmp" "$openai_dir" 2>/dev/null || rm -rf "$tmp"
fi

# Anthropic's official client, at a pinned version, the same way.
readonly ANTHROPIC_VERSION="1.17.0"
anthropic_dir="$cache_dir/node-anthropic-$ANTHROPIC_VERSION"
if [[ " ${tests[*]} " == *" anthropic "* ]] && [ ! -f "$anthropic_dir/node_modules/@anthropic-ai/sdk/package.json" ]; then
    command -v npm >/dev/null 2>&1 || { echo "serve tests: npm is missing (scripts/bootstrap.sh installs it)" >&2; exit 1; }
    mkdir -p "$cache_dir"
    tmp="$(mktemp -d "$cache_dir/node-anthropic-tmp.XXXXXX")"
    timeout 300 npm install --prefix "$tmp" --no-audit --no-fund --no-package-lock --silent "@anthropic-ai/sdk@$ANTHROPIC_VERSION" >&2 \
        || { rm -rf "$tmp"; echo "serve tests: npm could not install @anthropic-ai/sdk@$ANTHROPIC_VERSION" >&2; exit 1; }
    mv -T "$tmp" "$anthropic_dir" 2>/dev/null || rm -rf "$tmp"
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The controlled glm4moe MTP fixture: the target continues a known cycle and
# its MTP head is always right. Its tiny vocabulary has no newline, so its
# chat template (which the chat endpoint must use) has none either.
"$fixture" glm4moe-mtp "$work/exact.gguf" \
    --chat-template '{% for m in messages %}[{{ m.role }}] {{ m.content }} {% endfor %}{% if add_generation_prompt %}[assistant] {% endif %}' >/dev/null

# The same with its rope wider than its heads: a server must refuse it at start.
"$fixture" glm4moe-mtp "$work/bad-rope.gguf" --set glm4moe.rope.dimension_count=u32:128 >/dev/null

# A random-weight target at a real width (Qwen3-0.6B's layers, 2 of them),
# Q4_K_M: its greedy tokens often lead a rival by less than rounding, so a
# kernel that computes a row differently in a shared batch changes them.
if [[ " ${tests[*]} " == *" near-ties "* ]]; then
    "$fixture" glm4moe-mtp "$work/near-tie.gguf" --shape qwen3-0.6b --random-target --drafter random \
        --n-vocab 8192 --n-layer 2 --seed 5 --type q4_k_m >/dev/null
    export SPECDEC_NEAR_TIE_MODEL="$work/near-tie.gguf"
fi

# The exact fixture with fill-in-the-middle tokens (three of its ordinary
# ones named FIM prefix, suffix and middle), for /infill.
if [[ " ${tests[*]} " == *" native "* ]]; then
    "$fixture" glm4moe-mtp "$work/fim.gguf" --set tokenizer.ggml.fim_pre_token_id=u32:3 \
        --set tokenizer.ggml.fim_suf_token_id=u32:4 --set tokenizer.ggml.fim_mid_token_id=u32:5 >/dev/null
    export SPECDEC_FIM_MODEL="$work/fim.gguf"
fi

# The exact fixture with a chat template in a tool-call format llama.cpp
# recognises (tools-template.jinja), after which the target calls a tool.
if [[ " ${tests[*]} " == *" tools "* || " ${tests[*]} " == *" anthropic "* || " ${tests[*]} " == *" responses "* ]]; then
    "$fixture" glm4moe-mtp "$work/tools.gguf" --chat-template "$(cat "$here/tools-template.jinja")" >/dev/null
    export SPECDEC_TOOLS_MODEL="$work/tools.gguf"
fi

# The exact fixture with chat templates that think (thinking-*.jinja): the
# target writes the markers, its reasoning and its answer.
if [[ " ${tests[*]} " == *" reasoning "* || " ${tests[*]} " == *" anthropic "* || " ${tests[*]} " == *" responses "* ]]; then
    for style in qwen deepseek tools; do
        "$fixture" glm4moe-mtp "$work/think-$style.gguf" --chat-template "$(cat "$here/thinking-$style.jinja")" >/dev/null
    done
    export SPECDEC_THINK_QWEN_MODEL="$work/think-qwen.gguf" SPECDEC_THINK_DEEPSEEK_MODEL="$work/think-deepseek.gguf" \
        SPECDEC_THINK_TOOLS_MODEL="$work/think-tools.gguf"
fi

# The targets scripts/demo.sh writes, as it writes them (their own chat
# template), and a vocabulary as large as its realistic model's (Qwen3's
# 151,936 tokens take a minute to write; 32,768 are built the same way).
if [[ " ${tests[*]} " == *" demo "* ]]; then
    "$fixture" qwen35-mtp "$work/demo-qwen35-mtp.gguf" --quiet
    "$fixture" glm4moe-mtp "$work/demo-glm4moe-mtp-wrong.gguf" --drafter wrong --quiet
    "$fixture" llama "$work/demo-llama.gguf" --quiet
    "$fixture" glm4moe-mtp "$work/demo-large-vocab.gguf" --shape test-32k --n-layer 1 --drafter exact --type q4_k_m --quiet
    models=""
    for m in qwen35-mtp glm4moe-mtp-wrong llama large-vocab; do models+="${models:+,}$m=$work/demo-$m.gguf"; done
    export SPECDEC_DEMO_MODELS="$models"
    # The body of the curl command the demo prints.
    SPECDEC_DEMO_CHAT_REQUEST="$(sed -n "s/^chat_request='\(.*\)'\$/\1/p" "$here/../../scripts/demo.sh")"
    export SPECDEC_DEMO_CHAT_REQUEST
fi

export SPECDEC_BIN="$specdec" SPECDEC_MODEL="$work/exact.gguf" SPECDEC_BAD_MODEL="$work/bad-rope.gguf" SPECDEC_OPENAI_DIR="$openai_dir" \
    SPECDEC_ANTHROPIC_DIR="$anthropic_dir"
# Worker threads sleep instead of spinning: ctest runs other test processes beside this one.
export OMP_WAIT_POLICY=PASSIVE
# One file at a time (these machines have two cores; Node 18 has no --test-concurrency).
rc=0
for t in "${tests[@]}"; do
    node --test --test-reporter=spec "$here/$t.test.mjs" || rc=1
done
exit "$rc"
