#!/usr/bin/env bash
# llama-server's own pytest suite (the pinned tree's tools/server/tests/unit,
# read where scripts/bootstrap.sh put it, never copied or changed), run
# against llama-server and against `specdec serve`, each on the project's
# generated fixtures instead of the models its presets download. The measure
# is the difference: tests llama-server passes on the fixtures and specdec
# does not. See docs/migrating-from-llama-server.md, "llama-server's test suite".
#   scripts/upstream-suite.sh [--servers llama,specdec] [--out DIR] [--record NAME]
#                             [--timeout S] [-- PYTEST_ARG...]
#   --servers  which servers to run (default both; the report needs both;
#              none: only the report, from the XML a run left in --out)
#   --out      folder for the JUnit XML, logs and results.md (default a
#              temporary one, kept and printed)
#   --record   also write the table as a dated record,
#              docs/results/<UTC date>-<host>-NAME.md (scripts/results.py record)
#   --timeout  seconds each test may take (default 60)
#   after --:  pytest arguments instead of the in-scope files, e.g.
#              -- unit/test_tokenize.py -k bos
# How: tools/upstream-suite/launch-server.py is the suite's server binary
# (LLAMA_SERVER_BIN_PATH): it puts a fixture in place of each preset's
# model and, for specdec, translates llama-server's options; the pytest
# plugin there skips the suite's model downloads and times each test; a
# stand-in for the `openai` package (not in Debian) is first on PYTHONPATH.
# Environment:
#   SPECDEC_BUILD_DIR  specdec's build directory (default build)
#   LLAMA_SERVER_BIN   llama-server to use (default: scripts/build-llama-server.sh builds it)
#   SPECDEC_LLAMA_DIR  the llama.cpp tree (default scripts/bootstrap.sh's)
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
log() { echo "upstream-suite: $*" >&2; }

servers="llama,specdec"
out=""
record=""
timeout=60
pytest_args=()
asked=("$@") # for the record's command
while [ $# -gt 0 ]; do
    case "$1" in
        --servers) servers="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --record) [[ "${2:-}" =~ ^[a-z0-9][a-z0-9-]*$ ]] || { log "--record NAME: lower-case letters, digits and '-' only"; exit 2; }
                  record="$2"; shift 2 ;;
        --timeout) timeout="$2"; shift 2 ;;
        --) shift; pytest_args=("$@"); break ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) log "unknown argument $1 (--help)"; exit 2 ;;
    esac
done

llama_dir="${SPECDEC_LLAMA_DIR:-$(scripts/bootstrap.sh | tail -n 1)}"
tests="$llama_dir/tools/server/tests"
[ -f "$tests/utils.py" ] || { log "no llama-server suite in $tests"; exit 1; }

# A Python with the suite's imports (Debian's: python3-pytest,
# python3-requests, python3-filelock, python3-wget, which bootstrap.sh installs).
python=""
for p in /usr/bin/python3 python3; do
    if "$p" -c 'import pytest, requests, filelock, wget' 2>/dev/null; then python="$p"; break; fi
done
[ -n "$python" ] || { log "no python3 with pytest, requests, filelock and wget (scripts/bootstrap.sh installs them)"; exit 1; }

build_dir="${SPECDEC_BUILD_DIR:-build}"
[ -x "$build_dir/bin/specdec" ] && [ -x "$build_dir/bin/specdec-fixture" ] || scripts/build.sh "$build_dir" -- specdec-cli specdec-fixture
specdec="$repo/$build_dir/bin/specdec"
fixture="$repo/$build_dir/bin/specdec-fixture"
llama_server=""
if [[ ",$servers," == *,llama,* ]]; then
    llama_server="${LLAMA_SERVER_BIN:-$(scripts/build-llama-server.sh | tail -n 1)}"
fi

[ -n "$out" ] || out="$(mktemp -d /tmp/upstream-suite.XXXXXX)"
mkdir -p "$out/fixtures"
out="$(cd "$out" && pwd)"
fixtures="$out/fixtures"

# The fixtures standing for the presets' models (launch-server.py, FIXTURES).
# Each has the fixtures' ASCII vocabulary and chat template, plus what the
# real models have and the suite relies on: BOS added to prompts, and byte
# tokens (SentencePiece's fallback) so that newlines and non-ASCII text
# tokenize. stories260K (the suite's usual small llama): the exact glm4moe
# MTP fixture; its FIM twin for the infill preset (three ordinary tokens
# named FIM prefix, suffix and middle); stories15M_MOE and its draft
# (test_speculative): the llama fixture pair, the draft under the name of
# the file the suite would download into ./tmp.
common=(--n-vocab 384 --byte-tokens --set tokenizer.ggml.add_bos_token=bool:true --quiet)
[ -f "$fixtures/stories260K.gguf" ] || "$fixture" glm4moe-mtp "$fixtures/stories260K.gguf" "${common[@]}"
[ -f "$fixtures/stories260K-infill.gguf" ] || "$fixture" glm4moe-mtp "$fixtures/stories260K-infill.gguf" "${common[@]}" \
    --set tokenizer.ggml.fim_pre_token_id=u32:3 --set tokenizer.ggml.fim_suf_token_id=u32:4 \
    --set tokenizer.ggml.fim_mid_token_id=u32:5
[ -f "$fixtures/stories15M_MOE.gguf" ] || "$fixture" llama "$fixtures/stories15M_MOE.gguf" "${common[@]}"
[ -f "$fixtures/stories15M-q4_0.gguf" ] || "$fixture" llama-draft "$fixtures/stories15M-q4_0.gguf" "${common[@]}"

# The in-scope files: every test_*.py not listed out of scope in scope.tsv.
if [ ${#pytest_args[@]} -eq 0 ]; then
    for f in "$tests"/unit/test_*.py; do
        name="$(basename "$f")"
        grep -qP "^out-of-scope\t$name\t" tools/upstream-suite/scope.tsv || pytest_args+=("unit/$name")
    done
fi

free_port() { "$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

run_suite() { # NAME BINARY
    local name="$1" bin="$2" work="$out/work-$1"
    mkdir -p "$work/tmp"
    ln -sf "$fixtures/stories15M-q4_0.gguf" "$work/tmp/stories15M-q4_0.gguf"
    log "$name: ${#pytest_args[@]} files, each test within ${timeout} s (log: $out/$name.log)"
    local start=$SECONDS rc=0 args=() a
    for a in "${pytest_args[@]}"; do [[ "$a" == unit/* ]] && args+=("$tests/$a") || args+=("$a"); done
    (
        cd "$work"  # the suite's ./tmp downloads and relative paths
        export PYTHONPATH="$repo/tools/upstream-suite/shim:$repo/tools/upstream-suite" PYTHONDONTWRITEBYTECODE=1
        export LLAMA_SERVER_BIN_PATH="$repo/tools/upstream-suite/launch-server.py" UPSTREAM_SUITE_SERVER="$name" \
            UPSTREAM_SUITE_BIN="$bin" UPSTREAM_SUITE_FIXTURES="$fixtures" UPSTREAM_SUITE_TESTS="$tests" \
            UPSTREAM_SUITE_TEST_TIMEOUT="$timeout" PORT="$(free_port)" LLAMA_CACHE="$work/tmp" OMP_WAIT_POLICY=PASSIVE
        "$python" -m pytest -c "$tests/pytest.ini" --rootdir "$tests" -p upstream_suite_plugin -p no:cacheprovider \
            -m "not slow" -q -rfE --tb=short --junitxml "$out/$name.xml" "${args[@]}"
    ) >"$out/$name.log" 2>&1 || rc=$?
    echo "$(( SECONDS - start ))" >"$out/$name.seconds"
    "$bin" --version 2>&1 | grep -m1 -E 'version|^specdec' | sed 's/^version: //' >"$out/$name.version" || true
    log "$name: $(tail -n 1 "$out/$name.log") in $(( SECONDS - start )) s"
    [ "$rc" -le 1 ] || { log "$name: pytest exited $rc; the end of $out/$name.log:"; tail -n 30 "$out/$name.log" >&2; }
}

[[ ",$servers," == *,llama,* ]] && run_suite llama "$llama_server"
[[ ",$servers," == *,specdec,* ]] && run_suite specdec "$specdec"

if [ -f "$out/llama.xml" ] && [ -f "$out/specdec.xml" ]; then
    cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -n 1)"
    commit="$(git rev-parse --short HEAD)$(git status --porcelain --untracked-files=no | grep -q . && echo ' (modified)')"
    meta="Run $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(nproc) CPUs ($cpu); commit $commit; $(cat "$out/specdec.version");"
    meta+=" llama-server $(cat "$out/llama.version"); -m 'not slow', ${timeout} s a test;"
    meta+=" llama-server $(cat "$out/llama.seconds") s, specdec $(cat "$out/specdec.seconds") s."
    "$python" tools/upstream-suite/report.py --llama "$out/llama.xml" --specdec "$out/specdec.xml" \
        --scope tools/upstream-suite/scope.tsv --meta "$meta" --out "$out/results.md"
    log "results: $out/results.md"
    [ -z "$record" ] || python3 scripts/results.py record --name "$record" --what "llama-server's test suite, $record" \
        --command "scripts/upstream-suite.sh $(printf '%q ' "${asked[@]}" | sed 's/ $//')" --markdown "$out/results.md"
fi
log "output kept in $out"
