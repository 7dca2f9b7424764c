#!/usr/bin/env bash
# Runs `specdec bench` and writes its dated record into docs/results/: the
# date, the CPU (and whether it has AVX512F and AMX), the commit, this exact
# command and the bench's Markdown report, with its JSON beside it (see
# docs/results/README.md). Conclusions are written into the record by hand.
#   scripts/record-bench.sh NAME [--what TEXT] [--host NAME] -- BENCH_ARG...
#   NAME        lower-case letters, digits and '-': the record is
#               docs/results/<UTC date>-<host>-NAME.md
#   --what      what was measured, for the record's title and the index
#               (default NAME)
#   --host      the host's short name (default the CPU family from
#               /proc/cpuinfo: xeon, epyc, ...)
#   BENCH_ARG   `specdec bench`'s options, but --json and --markdown, which
#               this script sets; a --chart is kept with the record
# Builds specdec's CLI first when it is missing (scripts/build.sh).
# Environment: SPECDEC_BUILD_DIR (default build).
#   scripts/record-bench.sh exact-fixture -- --fixture exact -t 2 --n-draft 1 --n-draft 8 --n-draft auto -r 4
set -euo pipefail
cd "$(dirname "$0")/.."
usage() { sed -n '6,16p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
[ $# -ge 1 ] || usage
name="$1"; shift
case "$name" in -h|--help) usage ;; esac
[[ "$name" =~ ^[a-z0-9][a-z0-9-]*$ ]] || { echo "record-bench: NAME: lower-case letters, digits and '-' only" >&2; exit 2; }
record_args=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    case "$1" in
        --what|--host) [ $# -ge 2 ] || usage; record_args+=("$1" "$2"); shift 2 ;;
        *) echo "record-bench: unknown option $1 (bench's options go after --)" >&2; usage ;;
    esac
done
[ "${1:-}" = "--" ] || usage
shift
bench_args=("$@")
chart=""
for ((i = 0; i < ${#bench_args[@]}; i++)); do
    case "${bench_args[$i]}" in
        --json|--markdown) echo "record-bench: ${bench_args[$i]} is set by this script" >&2; exit 2 ;;
        --chart) chart="${bench_args[$((i + 1))]:-}" ;;
    esac
done

build_dir="${SPECDEC_BUILD_DIR:-build}"
specdec="$build_dir/bin/specdec"
[ -x "$specdec" ] || scripts/build.sh "$build_dir" -- specdec-cli
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$specdec" bench "${bench_args[@]}" --json "$tmp/bench.json" --markdown "$tmp/bench.md"

command="scripts/record-bench.sh $(printf '%q ' "$name" "${record_args[@]}" -- "${bench_args[@]}")"
assets=()
[ -n "$chart" ] && [ -f "$chart" ] && assets=(--asset "$chart")
python3 scripts/results.py record --name "$name" "${record_args[@]}" --command "${command% }" \
    --markdown "$tmp/bench.md" --json "$tmp/bench.json" "${assets[@]}"
