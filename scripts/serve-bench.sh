#!/usr/bin/env bash
# The serving benchmark: specdec serve (plain and MTP with --n-draft auto)
# against upstream llama-server (plain and its MTP) from the same pinned
# llama.cpp, on the exact / mixed / random MTP fixtures, at several
# concurrencies, in one run. See docs/serving.md. Progress goes to stderr:
# which fixture, server, concurrency and round runs, how many remain and,
# once a round has been timed, the time left (--quiet: none).
#   scripts/serve-bench.sh [OPTION...]   (options: tools/serve-bench/driver.mjs --help)
#   --record NAME  (this script's own) also write the run's dated record,
#                  docs/results/<UTC date>-<host>-NAME.md, with its summary.json
#                  and chart beside it (scripts/results.py record; see
#                  docs/results/README.md)
#   --what TEXT    (with --record) what was measured, for the record's title
#                  and the index (default "serve-bench NAME")
# Builds what is missing first: the Debian packages and llama.cpp
# (scripts/bootstrap.sh), specdec and its fixture tool (scripts/build.sh),
# llama-server (scripts/build-llama-server.sh).
# Environment:
#   SPECDEC_BUILD_DIR  specdec's build directory (default build)
#   SPECDEC_JOBS       build jobs (default nproc)
#   plus those of scripts/bootstrap.sh and scripts/build-llama-server.sh
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "serve-bench: $*" >&2; }

for arg in "$@"; do
    if [ "$arg" = "-h" ] || [ "$arg" = "--help" ]; then
        if command -v node >/dev/null 2>&1; then
            node tools/serve-bench/driver.mjs --help
            echo "  --record NAME          (serve-bench.sh) also write docs/results/<UTC date>-<host>-NAME.md"
            echo "  --what TEXT            (serve-bench.sh, with --record) what was measured, for the record's title"
            exit 0
        fi
    fi
done

# --record NAME and --what TEXT are this script's; the driver gets the rest, and an --out to read back.
record=""
what=""
out=""
driver_args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --record) [ $# -ge 2 ] || { log "--record needs a NAME"; exit 2; }; record="$2"; shift 2; continue ;;
        --what) [ $# -ge 2 ] || { log "--what needs a TEXT"; exit 2; }; what="$2"; shift 2; continue ;;
        --out) out="${2:-}" ;;
    esac
    driver_args+=("$1"); shift
done
asked=("${driver_args[@]}")
[ -z "$what" ] || [ -n "$record" ] || { log "--what describes a record: give --record NAME too"; exit 2; }
if [ -n "$record" ]; then
    [[ "$record" =~ ^[a-z0-9][a-z0-9-]*$ ]] || { log "--record NAME: lower-case letters, digits and '-' only"; exit 2; }
    if [ -z "$out" ]; then
        out="${TMPDIR:-/tmp}/specdec-serve-bench-$(date -u +%Y-%m-%dT%H-%M-%S)"
        driver_args+=(--out "$out")
    fi
fi
set -- "${driver_args[@]}"

scripts/bootstrap.sh >/dev/null # Debian packages (node and npm among them) and llama.cpp
command -v node >/dev/null 2>&1 || { log "node is missing after scripts/bootstrap.sh"; exit 1; }
node_major="$(node -p 'process.versions.node.split(".")[0]')"
[ "$node_major" -ge 18 ] || { log "Node $node_major is too old (18 or later: built-in fetch and web streams)"; exit 1; }

build_dir="${SPECDEC_BUILD_DIR:-build}"
# Which servers were asked for decides what must be built.
servers="specdec-none,specdec-mtp,llama-plain,llama-mtp"
prev=""
for arg in "$@"; do
    [ "$prev" = "--servers" ] && servers="$arg"
    prev="$arg"
done

specdec_args=()
if [[ "$servers" == *specdec* ]] || [ ! -x "$build_dir/bin/specdec-fixture" ]; then
    scripts/build.sh "$build_dir" -- specdec-cli specdec-fixture
fi
if [[ "$servers" == *specdec* ]]; then
    if ! "$build_dir/bin/specdec" serve --help >/dev/null 2>&1; then
        log "$build_dir/bin/specdec has no 'serve' command yet; run the llama-server rows only with --servers llama-plain,llama-mtp"
        exit 1
    fi
    specdec_args=(--specdec "$build_dir/bin/specdec")
fi
llama_args=()
if [[ "$servers" == *llama* ]]; then
    llama_args=(--llama-server "$(scripts/build-llama-server.sh | tail -n 1)")
fi
driver=(node tools/serve-bench/driver.mjs --fixture-tool "$build_dir/bin/specdec-fixture" "${specdec_args[@]}" "${llama_args[@]}" "$@")
[ -n "$record" ] || exec "${driver[@]}"
status=0
"${driver[@]}" || status=$?
# A run that measured anything is recorded, identical or not (its tables say which).
if [ -f "$out/results.md" ]; then
    assets=()
    [ -f "$out/tokens-per-s.svg" ] && assets=(--asset "$out/tokens-per-s.svg")
    python3 scripts/results.py record --name "$record" --what "${what:-serve-bench $record}" \
        --command "scripts/serve-bench.sh $(printf '%q ' "${asked[@]}")--record $record" \
        --markdown "$out/results.md" --json "$out/summary.json" "${assets[@]}" || status=$((status ? status : 1))
else
    log "no results in $out: nothing recorded"
fi
exit "$status"
