#!/usr/bin/env bash
# How much of real text the tokenizer's draft-vocabulary ranking holds, against a ranking counted from other
# text of the same kinds: Qwen2/Qwen3's vocabulary (151,936 tokens) and DeepSeek LLM's (102,400), as the pinned
# llama.cpp tree carries them. Counted: 26 MB of held-out text (llama.cpp's Markdown, Python 3.11's standard
# library, llama.cpp's C/C++, the OpenAI and Anthropic SDKs' TypeScript, /usr/share/doc). Measured on: seven
# files none of those hold.
set -eu
L=${SPECDEC_LLAMA_DIR:-$HOME/.cache/specdec/llama.cpp-v0.5.0}
B=${1:-/work/main/build}
C=/tmp/corpus
mkdir -p $C
find $L -name "*.md" ! -path "*/docs/build.md" ! -path "*/tools/server/README.md" -print0 | xargs -0 cat > $C/md.txt
find /usr/lib/python3.11 -name "*.py" ! -name argparse.py ! -path "*/test/*" -print0 | head -z -n 400 | xargs -0 cat > $C/py.txt
find $L/src $L/common $L/tools $L/ggml/src/ggml-cpu \( -name "*.cpp" -o -name "*.h" -o -name "*.c" \) ! -name llama-vocab.cpp ! -name ggml.c -print0 \
  | xargs -0 cat | head -c 8000000 > $C/cpp.txt || true
find $HOME/.cache/specdec/node-openai-6.49.0/node_modules/openai/src $HOME/.cache/specdec/node-anthropic-1.17.0 -name "*.ts" ! -name client.ts ! -name "*.d.ts" -print0 \
  | xargs -0 cat | head -c 6000000 > $C/ts.txt || true
{ find /usr/share/doc -name "README*" ! -name "*.gz" -print0 | xargs -0 cat; zcat /usr/share/doc/*/changelog.Debian.gz | head -c 3000000; } > $C/doc.txt 2>/dev/null || true
T=/usr/share/common-licenses/GPL-3:$L/docs/build.md:$L/tools/server/README.md:/usr/lib/python3.11/argparse.py:$L/ggml/src/ggml.c:$L/src/llama-vocab.cpp
T=$T:$HOME/.cache/specdec/node-openai-6.49.0/node_modules/openai/src/client.ts
for v in qwen2 deepseek-llm; do
  SPECDEC_RANKING_VOCAB=$L/models/ggml-vocab-$v.gguf SPECDEC_RANKING_TEXT=$T SPECDEC_RANKING_COUNTED=$(ls $C/*.txt | paste -sd:) \
    $B/tests/test-draft-vocab-ranking --gtest_also_run_disabled_tests --gtest_filter='*Coverage*' 2>&1 | grep measured | sed "s|$HOME/.cache/specdec/||"
done
