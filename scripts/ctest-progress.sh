#!/usr/bin/env bash
# Progress of a ctest run, for scripts that send ctest's own output to a log:
#   ctest ... 2>&1 | tee LOG | scripts/ctest-progress.sh PREFIX
# reads ctest's output on stdin and says on stderr how many tests are done of
# how many, and which are running: on a terminal one line rewritten in place;
# elsewhere a line at every tenth of the tests and at least every 30 s. A
# test that does not pass gets a line of its own at once.
set -uo pipefail
prefix="${1:-test}"
live=0
[ -t 2 ] && live=1

done_n=0 total=0 tenth=-1 last=$SECONDS pending=""
declare -A running=() # test name -> the time it started
shown=0

say() { # say TEXT: a step (a line of its own off a terminal)
    if [ "$live" -eq 1 ]; then
        printf '\r\033[K%s: %s' "$prefix" "$1" >&2
        shown=1
    else
        printf '%s: %s\n' "$prefix" "$1" >&2
    fi
    last=$SECONDS
}
note() { # note TEXT: a line of its own, also on a terminal
    [ "$shown" -eq 1 ] && printf '\r\033[K' >&2
    shown=0
    printf '%s: %s\n' "$prefix" "$1" >&2
    last=$SECONDS
}
now_running() {
    local name list="" n=0
    for name in "${!running[@]}"; do
        n=$((n + 1))
        [ "$n" -le 3 ] && list+="${list:+, }$name ($(( SECONDS - running[$name] )) s)"
    done
    [ "$n" -gt 3 ] && list+=", $((n - 3)) more"
    echo "$list"
}
status_line() {
    local r
    r="$(now_running)"
    if [ "$total" -gt 0 ]; then
        echo "[$done_n/$total] tests done${r:+; running: $r}"
    else
        echo "running: ${r:-nothing yet}"
    fi
}

# "  12/485 Test  #12: NAME ....   Passed    0.05 sec" (or "***Failed", "***Timeout", "***Exception: ..."); a
# parameterized googletest NAME goes on with "  # GetParam() = ..." (in "Start" lines too).
finished='^[[:space:]]*([0-9]+)/([0-9]+)[[:space:]]+Test[[:space:]]+#[0-9]+:[[:space:]]+(.*)[[:space:]]\.+[[:space:]]*(\*\*\*)?([A-Za-z][^*]*[^[:space:]])[[:space:]]+([0-9.]+)[[:space:]]+sec'
test_name() { # test_name TEXT: the test's name without googletest's parameter dump
    local n="${1%% # GetParam*}"
    echo "${n%"${n##*[![:space:]]}"}"
}

while true; do
    if IFS= read -r -t 30 line; then
        line="$pending$line"
        pending=""
    else
        rc=$?
        if [ "$rc" -gt 128 ]; then # 30 s without a line: partial input is kept in $line
            pending+="$line"
            say "$(status_line)"
            continue
        fi
        line="$pending$line"
        pending=""
        [ -z "$line" ] && break # end of input
    fi
    if [[ "$line" =~ ^[[:space:]]*Start[[:space:]]+[0-9]+:[[:space:]]+(.*)$ ]]; then
        running["$(test_name "${BASH_REMATCH[1]}")"]=$SECONDS
    elif [[ "$line" =~ $finished ]]; then
        done_n="${BASH_REMATCH[1]}"
        total="${BASH_REMATCH[2]}"
        name="$(test_name "${BASH_REMATCH[3]}")"
        result="${BASH_REMATCH[5]} (${BASH_REMATCH[6]} s)"
        unset 'running[$name]' # single quotes: a name holding quotes (a parameter "qwen35") is removed too
        if [[ "$result" != Passed* ]]; then
            note "[$done_n/$total] $name: $result"
        elif [ "$live" -eq 1 ] || [ $(( done_n * 10 / total )) -gt "$tenth" ] || [ $(( SECONDS - last )) -ge 30 ]; then
            say "$(status_line)"
        fi
        tenth=$(( done_n * 10 / total ))
    fi
done
[ "$shown" -eq 1 ] && printf '\r\033[K' >&2
exit 0
