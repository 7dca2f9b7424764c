#!/usr/bin/env bash
# Runs one embedding example on generated fixtures and checks what it prints.
#
#   run-example.sh [options] FIXTURE_TOOL EXAMPLE KIND...
#
# Writes one fixture per KIND (`FIXTURE_TOOL KIND DIR/KIND.gguf --drafter D`)
# into a temporary directory, runs `EXAMPLE DIR/KIND1.gguf [DIR/KIND2.gguf] PROMPT`
# and checks, by default:
#  - exit status 0, and stdout is exactly the continuation the fixture
#    construction implies for PROMPT (derived below);
#  - the summary line on stderr reports 64 tokens, and drafted / accepted
#    counts as --expect says.
# Options:
#   --drafter D          exact (default), wrong, hidden or random
#   --expect all         accepted == drafted > 0 (exact drafters; default)
#   --expect partial     0 < accepted < drafted (wrong drafters)
#   --expect some        drafted > 0 and accepted > 0 (n-gram lookup)
#   --expect-error RE    instead: the example fails (non-zero status, empty
#                        stdout) with a message matching RE on stderr
#   --prompt TEXT        another prompt (only with --expect-error)
set -euo pipefail

# The prompt repeats a long pattern (the n-gram drafter finds it) and uses no
# lowercase letters, so no two-letter piece can merge.
#
# Test vocabulary (add_test_vocab): 0..2 <unk> <s> </s>, 3 "▁" (a space),
# 4..97 the characters '!'..'~' (id = ASCII code - 29), 98.. the pairs "aa",
# "ab", ... The SPM tokenizer adds the leading "▁" and no BOS
# (add_bos_token = false): ▁ A..Z ▁ A..Z ▁ A..P, the last token 'P' = 80 - 29
# = 51. A controlled target continues greedily with successor(t) = t + 1
# (wrapping 127 -> 3), and the examples generate 64 tokens: ids 52..97, the
# 46 characters 'Q'..'~', then ids 98..115, the 18 pairs "aa".."ar".
prompt='ABCDEFGHIJKLMNOPQRSTUVWXYZ ABCDEFGHIJKLMNOPQRSTUVWXYZ ABCDEFGHIJKLMNOP'
expected='QRSTUVWXYZ[\]^_`abcdefghijklmnopqrstuvwxyz{|}~aaabacadaeafagahaiajakalamanaoapaqar'
n_expected=64

drafter=exact
expect=all
expect_error=
while [[ $# -gt 0 && $1 == --* ]]; do
    case $1 in
        --drafter)      drafter=$2; shift 2 ;;
        --expect)       expect=$2; shift 2 ;;
        --expect-error) expect_error=$2; shift 2 ;;
        --prompt)       prompt=$2; shift 2 ;;
        *) echo "run-example.sh: unknown option $1" >&2; exit 2 ;;
    esac
done
if [[ $# -lt 3 ]]; then
    echo "usage: run-example.sh [options] FIXTURE_TOOL EXAMPLE KIND..." >&2
    exit 2
fi
fixture_tool=$1
example=$2
shift 2

fail() {
    echo "FAIL: $*" >&2
    echo "--- stdout of $(basename "$example")" >&2
    cat "$tmp/stdout" >&2 || true
    echo "--- stderr of $(basename "$example")" >&2
    cat "$tmp/stderr" >&2 || true
    exit 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

models=()
for kind in "$@"; do
    "$fixture_tool" "$kind" "$tmp/$kind.gguf" --drafter "$drafter"
    models+=("$tmp/$kind.gguf")
done

status=0
"$example" "${models[@]}" "$prompt" >"$tmp/stdout" 2>"$tmp/stderr" || status=$?

if [[ -n $expect_error ]]; then
    [[ $status -ne 0 ]] || fail "expected a failure, got exit status 0"
    [[ ! -s $tmp/stdout ]] || fail "expected no output on stdout"
    grep -Eq -- "$expect_error" "$tmp/stderr" || fail "stderr does not match /$expect_error/"
    echo "ok: failed with status $status: $(grep -E -- "$expect_error" "$tmp/stderr" | head -n 1)"
    exit 0
fi

[[ $status -eq 0 ]] || fail "exit status $status"
printf '%s\n' "$expected" | cmp -s - "$tmp/stdout" || fail "stdout is not the expected continuation '$expected'"

summary=$(grep -E '^example-[a-z0-9]+: [0-9]+ tokens in [0-9]+ steps, drafted [0-9]+, accepted [0-9]+ ' "$tmp/stderr" || true)
[[ -n $summary ]] || fail "no summary line on stderr"
re='^example-[a-z0-9]+: ([0-9]+) tokens in ([0-9]+) steps, drafted ([0-9]+), accepted ([0-9]+) '
[[ $summary =~ $re ]] || fail "unreadable summary '$summary'"
generated=${BASH_REMATCH[1]}
drafted=${BASH_REMATCH[3]}
accepted=${BASH_REMATCH[4]}
[[ $generated -eq $n_expected ]] || fail "summary reports $generated tokens, expected $n_expected"
case $expect in
    all)     [[ $drafted -gt 0 && $accepted -eq $drafted ]] || fail "expected accepted == drafted > 0" ;;
    partial) [[ $accepted -gt 0 && $accepted -lt $drafted ]] || fail "expected 0 < accepted < drafted" ;;
    some)    [[ $drafted -gt 0 && $accepted -gt 0 ]] || fail "expected drafted > 0 and accepted > 0" ;;
    *)       echo "run-example.sh: unknown --expect $expect" >&2; exit 2 ;;
esac
echo "ok: $summary"
